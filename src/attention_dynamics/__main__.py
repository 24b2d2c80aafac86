"""``python -m attention_dynamics`` — the book's runner (see :mod:`attention_dynamics.book.reproduce`)."""

import sys

from .book.reproduce import main

sys.exit(main())
