"""``python -m dlbook COMMAND``: the instructor's command line (dlbook.coursework.cli)."""
from dlbook.coursework.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
