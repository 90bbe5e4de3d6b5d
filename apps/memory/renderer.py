"""The Knowledge Renderer: triples as a short, readable block for the system prompt.

Models use "Name: Marcello" far better than "User → has_name → Marcello", so statements about the
user drop the subject, and everything is grouped under localised category headings.
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.memory.models import Category, Triple

LANGUAGES = ("en", "it", "de", "fr", "es")

TITLES = {
    "en": "What you know about the user and the world",
    "it": "Ciò che sai dell'utente e del mondo",
    "de": "Was du über den Nutzer und die Welt weißt",
    "fr": "Ce que tu sais de l'utilisateur et du monde",
    "es": "Lo que sabes del usuario y del mundo",
}

CATEGORY_LABELS: dict[str, dict[str, str]] = {
    Category.IDENTITY: {
        "en": "Identity",
        "it": "Identità",
        "de": "Identität",
        "fr": "Identité",
        "es": "Identidad",
    },
    Category.RELATIONSHIPS: {
        "en": "Relationships",
        "it": "Relazioni",
        "de": "Beziehungen",
        "fr": "Relations",
        "es": "Relaciones",
    },
    Category.PLACES: {
        "en": "Places",
        "it": "Luoghi",
        "de": "Orte",
        "fr": "Lieux",
        "es": "Lugares",
    },
    Category.WORK: {
        "en": "Work and studies",
        "it": "Lavoro e studi",
        "de": "Arbeit und Studium",
        "fr": "Travail et études",
        "es": "Trabajo y estudios",
    },
    Category.SKILLS: {
        "en": "Skills",
        "it": "Competenze",
        "de": "Fähigkeiten",
        "fr": "Compétences",
        "es": "Habilidades",
    },
    Category.PREFERENCES: {
        "en": "Preferences",
        "it": "Preferenze",
        "de": "Vorlieben",
        "fr": "Préférences",
        "es": "Preferencias",
    },
    Category.GOALS: {
        "en": "Goals",
        "it": "Obiettivi",
        "de": "Ziele",
        "fr": "Objectifs",
        "es": "Objetivos",
    },
    Category.HEALTH: {
        "en": "Health",
        "it": "Salute",
        "de": "Gesundheit",
        "fr": "Santé",
        "es": "Salud",
    },
    Category.EXPERIENCES: {
        "en": "Experiences",
        "it": "Esperienze",
        "de": "Erfahrungen",
        "fr": "Expériences",
        "es": "Experiencias",
    },
    Category.KNOWLEDGE: {
        "en": "General knowledge",
        "it": "Conoscenze generali",
        "de": "Allgemeinwissen",
        "fr": "Connaissances générales",
        "es": "Conocimiento general",
    },
}

# Subjects that mean "the person chatting"; their statements are rendered without a subject.
USER_SUBJECTS = frozenset({"user", "the user", "me", "i", "self", "utente", "nutzer"})


def _is_about_user(subject: str, user) -> bool:
    subject = subject.strip().casefold()
    return subject in USER_SUBJECTS or (
        user is not None and subject == user.get_username().casefold()
    )


def render_knowledge(*, triples: Iterable[Triple], language: str, user=None) -> str:
    """Group triples by category (in Category's order), then one line per subject+predicate."""
    language = language if language in LANGUAGES else "en"
    order = {value: index for index, value in enumerate(Category.values)}
    grouped: dict[str, dict[tuple[str, str], list[str]]] = {}
    for triple in triples:
        about_user = _is_about_user(triple.subject, user)
        label = triple.predicate.label(language)
        key = (label, "") if about_user else (label, triple.subject)
        values = grouped.setdefault(triple.category, {}).setdefault(key, [])
        if triple.object not in values:
            values.append(triple.object)
    if not grouped:
        return ""
    lines = [f"{TITLES[language]}:"]
    for category in sorted(grouped, key=lambda name: order.get(name, len(order))):
        heading = CATEGORY_LABELS.get(category, {}).get(language) or category.capitalize()
        lines.append(f"{heading}")
        for (label, subject), values in grouped[category].items():
            prefix = f"{subject} — " if subject else ""
            lines.append(f"- {prefix}{label}: {', '.join(values)}")
    return "\n".join(lines)
