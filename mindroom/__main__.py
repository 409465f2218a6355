"""``python -m mindroom``."""

from mindroom.cli import main

raise SystemExit(main())
