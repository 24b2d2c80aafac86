"""The book's chapters, one folder each, all of the same shape (above the library, which they share):

- ``settings.py`` — the chapter's typed settings: a frozen dataclass (a
  :class:`~attention_dynamics.core.settings.ChapterSettings`), one instance per scale in ``SETTINGS``, and
  ``resolve(scale, device=..., **overrides)``, which validates a notebook's parameters once. The only place that
  knows the chapter's sizes.
- ``runs.py`` — what the chapter computes (training runs, checks, sweeps) and, where its results are too heavy for
  the chapter's time budget, the stored results that ``python -m attention_dynamics compute`` makes.
- ``report.py`` — the chapter's ledger claims and glued numbers: every claim id the chapter records appears here
  as a literal string, so searching for an id finds where it is recorded.
- ``figures.py`` — the chapter's figures, in the book's one style (:mod:`attention_dynamics.core.plotting`).

A folder is named after its notebook (``book/05-sticky-markov-chain.ipynb`` → ``chapters/sticky_markov_chain``);
a large chapter adds modules named for what they hold. No chapter imports another chapter: what two chapters use
lives in the library (``tests/test_layers.py``).
"""
