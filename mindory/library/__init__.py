from mindory.library.core import *  # noqa: F403
from mindory.library.core import (  # noqa: F401
    BOOK_SUFFIXES,
    MIGRATIONS,
    _alembic_config,
    _make_engine,
    _script_heads,
    downgrade,
    upgrade,
)
