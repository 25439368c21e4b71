from mindory.cli.commands import main

__all__ = ["main"]
