"""The Knowledge Renderer: triples as a short, readable block for the system prompt.

Models use "Name: Marcello" far better than "User → has_name → Marcello", so statements about the
user drop the subject, and everything is grouped under localised category headings.
"""

from __future__ import annotations

from collections.abc import Iterable

from apps.memory.models import Category, Triple, WorldState
from apps.memory.provenance import datamark, is_data

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


def knowledge_line(*, triple: Triple, language: str, user=None, marker: str = "") -> str:
    """One triple as its line in `render_knowledge` (to weigh it against a budget)."""
    language = language if language in LANGUAGES else "en"
    label = triple.predicate.label(language)
    prefix = "" if _is_about_user(triple.subject, user) else f"{triple.subject} — "
    return f"- {datamark(f'{prefix}{label}: {triple.object}', marker)}"


def render_knowledge(*, triples: Iterable[Triple], language: str, user=None, marker="") -> str:
    """Group triples by category (in Category's order), then one line per subject+predicate;
    with a `marker`, each line datamarked (apps.memory.provenance: triples are data)."""
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
            said = f"{prefix}{label}: {', '.join(values)}"
            lines.append(f"- {datamark(said, marker)}")
    return "\n".join(lines)


MEMORY_HEADINGS = {
    "en": ("Relevant memories", "Past episodes", "lesson"),
    "it": ("Ricordi pertinenti", "Episodi passati", "lezione"),
    "de": ("Relevante Erinnerungen", "Frühere Episoden", "Lehre"),
    "fr": ("Souvenirs pertinents", "Épisodes passés", "leçon"),
    "es": ("Recuerdos relevantes", "Episodios pasados", "lección"),
}


def memory_line(description: str, *, source: str = "", marker: str = "") -> str:
    """A recalled memory's line; with a `marker`, datamarked if its `source` makes it data."""
    if marker and is_data(source):
        return f"- {datamark(description, marker)}"
    return f"- {' '.join(description.split())}"


def episode_line(*, summary: str, ended_at, lesson: str, language: str, marker: str = "") -> str:
    """An episode's line; with a `marker`, its summary and lesson (the model's) datamarked."""
    lesson_word = MEMORY_HEADINGS.get(language, MEMORY_HEADINGS["en"])[2]
    lesson = datamark(lesson, marker) if marker else " ".join(lesson.split())
    return "- {} ({}){}".format(
        datamark(summary, marker) if marker else " ".join(summary.split()),
        ended_at.date().isoformat(),
        f" — {lesson_word}: {lesson}" if lesson else "",
    )


def memory_block_headings(*, language: str) -> str:
    """The headings `render_memory_block` writes around the lines, but the categories' (a few
    tokens each, which the others, never all written at once, cover): what a budget counts
    besides the lines."""
    language = language if language in LANGUAGES else "en"
    memory_heading, episode_heading, _ = MEMORY_HEADINGS[language]
    return "\n".join([TITLES[language], memory_heading, episode_heading])


def render_memory_block(
    *, knowledge, memories, episodes, language: str, user=None, marker: str = ""
) -> str:
    """The memory part of the prompt: the knowledge graph, memories, then episodes; with a
    `marker`, what is data datamarked (apps.memory.provenance)."""
    memory_heading, episode_heading, _ = MEMORY_HEADINGS.get(language, MEMORY_HEADINGS["en"])
    rendered = render_knowledge(triples=knowledge, language=language, user=user, marker=marker)
    sections = [rendered] if rendered else []
    if memories:
        lines = "\n".join(
            memory_line(hit.description, source=hit.source, marker=marker) for hit in memories
        )
        sections.append(f"{memory_heading}:\n{lines}")
    if episodes:
        lines = "\n".join(
            episode_line(
                summary=hit.summary,
                ended_at=hit.ended_at,
                lesson=hit.lesson,
                language=language,
                marker=marker,
            )
            for hit in episodes
        )
        sections.append(f"{episode_heading}:\n{lines}")
    return "\n\n".join(sections)


WORLD_LABELS = {
    "en": ("Current topics", "Active project", "Goals", "How to answer"),
    "it": ("Argomenti attuali", "Progetto attivo", "Obiettivi", "Come rispondere"),
    "de": ("Aktuelle Themen", "Aktives Projekt", "Ziele", "Wie du antworten sollst"),
    "fr": ("Sujets actuels", "Projet en cours", "Objectifs", "Comment répondre"),
    "es": ("Temas actuales", "Proyecto activo", "Objetivos", "Cómo responder"),
}


def render_world(
    state: WorldState, *, language: str = "en", proposed: bool | None = None, marker: str = ""
) -> str:
    """The world state as a few labelled lines; "" when it is empty. With `proposed` False,
    only what a person wrote by hand (the system prompt's); True, only what the model proposed
    (data: the memory note's, datamarked with `marker`); None, all of it."""
    topics, project, goals, behaviour = WORLD_LABELS.get(language, WORLD_LABELS["en"])
    by_model = {text.casefold() for text in state.proposed}

    def kept(items: list[str]) -> list[str]:
        if proposed is None:
            return items
        return [item for item in items if (item.casefold() in by_model) == proposed]

    parts = [
        (topics, kept(state.topics), ", "),
        (project, kept([state.project] if state.project else []), ""),
        (goals, kept(state.goals), "; "),
        (behaviour, kept(state.behaviour), "; "),
    ]
    return "\n".join(
        f"{label}: {datamark(joiner.join(items), marker)}"
        for label, items, joiner in parts
        if items
    )
