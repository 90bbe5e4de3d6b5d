"""The words and dates of a query: its meaningful words, for the full-text match (stemmed there
by PostgreSQL's snowball stemmers, models.STEMMED_LANGUAGES), and the periods it names, for
matching memories made then."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.utils import timezone

MAX_QUERY_WORDS = 24
# Words too common to say anything in a full-text match, in the five renderer languages.
_STOPWORD_TEXT = """
    a an and are as at be but by can could did do does for from had has have how i if in is it
    its me my no not of on or our she so that the their them then there they this to was we were
    what when where which who why will with would you your yours he him his her hers us
    il lo la le gli i un una uno e è di da del della che chi non per con su mi ti si ci vi
    der die das ein eine und ist nicht zu mit von ich du er sie es wir ihr den dem des
    le les un une et est pas de du des que qui je tu il elle nous vous ils au aux
    el los las un una y es no de del que quien yo tú él ella nosotros se lo
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_MONTHS = [
    *("january", "february", "march", "april", "may", "june"),
    *("july", "august", "september", "october", "november", "december"),
]
_MONTH = "|".join(_MONTHS)
# "8 May 2023", "May 8, 2023", "May 2023", "in June", "2023". "May" and "March" are months only
# next to a day or a year, or after "in": "May I ask" names no date.
_DATE_RE = re.compile(
    rf"\b(?:(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?)?(?P<month>{_MONTH})"
    rf"(?:\s+(?P<day_after>\d{{1,2}})(?:st|nd|rd|th)?\b)?(?:,?\s+(?P<year>(?:19|20)\d\d))?\b"
    r"|\b(?P<lone_year>(?:19|20)\d\d)\b",
    re.IGNORECASE,
)
_RELATIVE_RE = re.compile(r"\b(yesterday|today|(?:last|this) (?:week|month|year))\b", re.IGNORECASE)


def query_words(text: str) -> list[str]:
    """The meaningful words of `text`, lower-cased, each once; the search stems them in SQL."""
    words: dict[str, None] = {}
    for word in _WORD_RE.findall(text.lower()):
        word = word.strip("_")
        if len(word) > 1 and word not in STOPWORDS:
            words.setdefault(word)
    return list(words)[:MAX_QUERY_WORDS]


# The languages whose dictionary forms a query's words also search by ("ran" → "run", which no
# stemmer makes). English only: simplemma's five renderer languages take 324 MB and 16 s to load
# in each process (bench/README.md, issue #29 item 4); English ~50 MB, loaded at the first search.
LEMMATIZED_LANGUAGES = ("en",)
# A dictionary form is also searched by at most this many of its irregular forms ("go" → "went").
IRREGULAR_FORMS_MAX = 6
_irregular: dict[str, tuple[str, ...]] | None = None
_irregular_lock = threading.Lock()
_VOWEL_RE = re.compile("[aeiouy]")


def irregular_forms() -> dict[str, tuple[str, ...]]:
    """Each English dictionary form's inflected forms that PostgreSQL's English stemmer does not
    bring back to it ("run" → "ran", "mouse" → "mice", "child" → "children"), from simplemma's
    dictionary turned round: 7,500 forms of 4,900 words, built once a process (0.5 s)."""
    global _irregular
    if _irregular is None:
        with _irregular_lock:
            if _irregular is None:
                _irregular = _irregular_forms_built()
    return _irregular


def _irregular_forms_built() -> dict[str, tuple[str, ...]]:
    import Stemmer
    from simplemma.strategies import DEFAULT_DICTIONARY_FACTORY

    pairs = [
        (form, lemma)
        for form, lemma in (
            (form.casefold(), lemma.casefold())
            for form, lemma in DEFAULT_DICTIONARY_FACTORY.get_dictionary("en").items()
        )
        # Abbreviations ("gdn" for "garden") have no vowel.
        if form != lemma and form.isalpha() and lemma.isalpha() and _VOWEL_RE.search(form)
    ]
    # Snowball's English stemmer, the one PostgreSQL's 'english' configuration runs.
    stem = Stemmer.Stemmer("english").stemWords
    form_stems = stem([form for form, _ in pairs])
    lemma_stems = stem([lemma for _, lemma in pairs])
    built: dict[str, set[str]] = {}
    for (form, lemma), form_stem, lemma_stem in zip(pairs, form_stems, lemma_stems, strict=True):
        if form_stem != lemma_stem:
            built.setdefault(lemma, set()).add(form)
    return {lemma: tuple(sorted(forms)[:IRREGULAR_FORMS_MAX]) for lemma, forms in built.items()}


def query_variants(words: list[str]) -> list[list[str]]:
    """For each word, the words it is searched by: itself, its dictionary form where that is
    another word ("ran" → "run", "mice" → "mouse"), and that form's irregular forms ("run" →
    "ran"); the search stems them all, so "I ran" is found by "run", "running" and "ran"."""
    import simplemma

    irregular = irregular_forms()
    variants = []
    for word in words:
        lemma = simplemma.lemmatize(word, lang=LEMMATIZED_LANGUAGES).casefold()
        lemma = lemma if lemma.isalpha() else word
        variants.append(list(dict.fromkeys([word, lemma, *irregular.get(lemma, ())])))
    return variants


def lemmas_load() -> None:
    """Load the lemma dictionary and its irregular forms, for a web process's warm-up
    (apps/core/warmup.py): a server's first search does not wait for them (1.4 s under load)."""
    query_variants(["ran"])


@dataclass
class NamedDates:
    """The periods a text names: [start, end) spans, and months named without a year."""

    spans: list[tuple[datetime, datetime]] = field(default_factory=list)
    months: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.spans or self.months)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def named_dates(text: str, *, now: datetime | None = None) -> NamedDates:
    """The dates a query names, for matching memories made then; relative ones count from now."""
    now = (now or timezone.now()).astimezone(UTC)
    named = NamedDates()
    for match in _DATE_RE.finditer(text):
        if match["lone_year"]:
            year = int(match["lone_year"])
            named.spans.append(
                (datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
            )
            continue
        month_name = match["month"].lower()
        day = match["day"] or match["day_after"]
        year = match["year"]
        before = text[: match.start()].rstrip().lower()
        if month_name in ("may", "march") and not (day or year or re.search(r"\bin$", before)):
            continue
        month = _MONTHS.index(month_name) + 1
        if not year:
            named.months.append(month)
        elif day and 1 <= int(day) <= 31:
            try:
                start = datetime(int(year), month, int(day), tzinfo=UTC)
            except ValueError:
                continue
            named.spans.append((start, start + timedelta(days=1)))
        else:
            named.spans.append(_month_span(int(year), month))
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week = today - timedelta(days=today.weekday())
    for phrase in _RELATIVE_RE.findall(text.lower()):
        if phrase == "today":
            named.spans.append((today, today + timedelta(days=1)))
        elif phrase == "yesterday":
            named.spans.append((today - timedelta(days=1), today))
        elif phrase == "this week":
            named.spans.append((week, week + timedelta(days=7)))
        elif phrase == "last week":
            named.spans.append((week - timedelta(days=7), week))
        elif phrase == "this month":
            named.spans.append(_month_span(now.year, now.month))
        elif phrase == "last month":
            previous = today.replace(day=1) - timedelta(days=1)
            named.spans.append(_month_span(previous.year, previous.month))
        elif phrase == "this year":
            named.spans.append(
                (datetime(now.year, 1, 1, tzinfo=UTC), datetime(now.year + 1, 1, 1, tzinfo=UTC))
            )
        else:
            named.spans.append(
                (datetime(now.year - 1, 1, 1, tzinfo=UTC), datetime(now.year, 1, 1, tzinfo=UTC))
            )
    return named
