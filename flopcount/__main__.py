"""``python -m flopcount ...`` is the ``flopcount`` command."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="flopcount")
