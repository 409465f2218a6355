"""``python -m mindroom``."""

from mindroom.cli.main import main

raise SystemExit(main())
