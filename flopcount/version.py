"""flopcount's version, in a leaf module: any part names it without importing the package."""

__version__ = "0.1.0"
