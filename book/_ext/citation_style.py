"""Citations that tell the trilogy's papers apart: "[Agarwal et al., 2025, Paper II]".

The three papers of the Bayesian Attention Trilogy share their authors and their year, so the
author–year style renders all three as "[Agarwal et al., 2025]". This extension registers the
referencing style ``author_year_shorthand`` (set as ``bibtex_reference_style`` in ``_config.yml``):
sphinxcontrib-bibtex's author–year style, with an entry's ``shorthand`` field, where it has one
(``shorthand = {Paper II}`` in ``book/references.bib``), added after the year. Entries without one
are cited exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from pybtex.style.template import field, first_of, join as plain_join, optional
from sphinx.application import Sphinx
from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.referencing.extra_author import ExtraAuthorReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_empty import ExtraEmptyReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_label import ExtraLabelReferenceStyle
from sphinxcontrib.bibtex.style.referencing.extra_year import ExtraYearReferenceStyle
from sphinxcontrib.bibtex.style.template import join, join2, node, post_text, pre_text, reference

STYLE_NAME = "author_year_shorthand"


@node
def year_shorthand(children, data):
    """The entry's year and, where the entry has one, its ``shorthand`` ("2025, Paper II")."""
    assert not children
    return first_of[
        optional[plain_join(sep=", ")[field("year"), field("shorthand")]],
        optional[field("year")],
        "n.d.",
    ].format_data(data)


@dataclass
class ShorthandParentheticalStyle(BasicAuthorYearParentheticalReferenceStyle):
    """``{cite}`` / ``{cite:p}``: [Author et al., year, shorthand]."""

    def inner(self, role_name: str):
        return join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text,
            reference[join(sep=self.author_year_sep)[
                self.person.author_or_editor_or_title(full="s" in role_name), year_shorthand]],
            post_text,
        ]


@dataclass
class ShorthandTextualStyle(BasicAuthorYearTextualReferenceStyle):
    """``{cite:t}``: Author et al. [year, shorthand]."""

    def inner(self, role_name: str):
        return join(sep=self.text_reference_sep)[
            self.person.author_or_editor_or_title(full="s" in role_name),
            join[self.bracket.left,
                 join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[pre_text, reference[year_shorthand], post_text],
                 self.bracket.right],
        ]


@dataclass
class AuthorYearShorthandReferenceStyle(AuthorYearReferenceStyle):
    """The author–year referencing style with each entry's ``shorthand`` after the year."""

    def __post_init__(self):
        self.styles.extend([
            ShorthandParentheticalStyle(bracket=self.bracket_parenthetical, person=self.person,
                                        author_year_sep=self.author_year_sep, pre_text_sep=self.pre_text_sep,
                                        post_text_sep=self.post_text_sep),
            ShorthandTextualStyle(bracket=self.bracket_textual, person=self.person,
                                  text_reference_sep=self.text_reference_sep, pre_text_sep=self.pre_text_sep,
                                  post_text_sep=self.post_text_sep),
            ExtraAuthorReferenceStyle(bracket=self.bracket_author, person=self.person),
            ExtraLabelReferenceStyle(bracket=self.bracket_label),
            ExtraYearReferenceStyle(bracket=self.bracket_year),
            ExtraEmptyReferenceStyle(),
        ])
        # GroupReferenceStyle's own set-up (role names to styles), skipping AuthorYearReferenceStyle's list.
        super(AuthorYearReferenceStyle, self).__post_init__()


register_plugin("sphinxcontrib.bibtex.style.referencing", STYLE_NAME, AuthorYearShorthandReferenceStyle)


def setup(app: Sphinx):
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
