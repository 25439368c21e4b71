"""The API's routers, one module per resource; each adds its routes with ``add_routes``."""
