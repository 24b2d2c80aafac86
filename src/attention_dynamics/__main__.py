"""``python -m attention_dynamics`` — the book's runner (see :mod:`attention_dynamics.book.cli`)."""

import sys

from .book.cli import main

sys.exit(main())
