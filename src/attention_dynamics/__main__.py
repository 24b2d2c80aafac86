"""``python -m attention_dynamics`` — the book's runner (see :mod:`attention_dynamics.reproduce`)."""

import sys

from .reproduce import main

sys.exit(main())
