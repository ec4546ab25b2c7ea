"""The bundle's one error type, part of binlake's error family (the CLI prints it, exits 2)."""

from binlake.errors import BinlakeError


class BundleError(BinlakeError):
    """bundle.yml or a resource file is malformed, or a bundle job cannot be run or deployed."""
