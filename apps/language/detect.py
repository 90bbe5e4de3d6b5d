"""Which of the five languages a message is in, from its common words and its letters.

A chat message is often a handful of words ("name's Ingrid", "vivo a Roma"), so each common
word counts for the languages that use it, shared ones ("me", "no", "in") split between them;
letters only one of the languages writes (ß, ñ, ç) settle a tie, and then the user's own
language, when the caller knows it.
"""

from __future__ import annotations

from apps.language.text import words

LANGUAGES = ("en", "it", "fr", "de", "es")

# Common words by language. "hier" is German (here) only, so a German message never counts
# as French for it.
_STOPWORD_TEXT = {
    "en": """the and is are was were you what did do does have has i my we of to in it that this
             with for on me about when how your be am here""",
    "it": """il lo gli che di è sono non per con una un mi ti cosa come quando abbiamo hai ho del
             della qui questo ma ci sei siamo""",
    "de": """der die das und ist ich du nicht mit ein eine wir was wann haben hast bin hier auf
             zu den dem es sie mir dich auch wie bist sind""",
    "fr": """le les et est je tu nous vous pas une des du que qui avons as ai suis sur avec dans
             ce cette quoi quand comment on moi j qu ici""",
    "es": """el los las y es yo tú que una por con para del qué cuándo cómo estoy aquí me mi no
             en lo estás somos""",
}

# Words of people telling about themselves in a chat, which tell the language of a short
# message ("vivo a Torino") but are no stopwords.
_CHAT_TEXT = {
    "en": """im ive m ve ll d but so just not at from our they he she his her if would can don t
             really live work been since an as at im got love like hate speak kids wife husband
             daughter son name""",
    "it": """io mio mia miei mie abito lavoro faccio anni chiamo nel nella alla anche molto però
             perché sì grazie più sempre sto ora a ad vivo abito lavoro studio parlo figlia
             figlio moglie marito mamma piace adoro odio allergico allergica anni da ciao""",
    "de": """mein meine meinen wohne arbeite habe jahre alt heiße heisse komme aus aber sehr ja
             danke kein keine immer für seit im bei wohne lebe arbeite spreche tochter sohn frau
             mann mag liebe hasse allergisch gegen hallo moin""",
    "fr": """mon ma mes habite travaille ans appelle c au aux mais très aussi oui merci pour
             toujours ne n depuis habite vis parle fille fils femme mari aime adore déteste
             allergique salut bonjour chez""",
    "es": """soy mis trabajo tengo años llamo pero muy también sí gracias siempre desde vivo
             hablo estudio hija hijo esposa marido gusta encanta odio alérgico alérgica hola""",
}
STOPWORDS_BY_LANGUAGE = {
    language: frozenset(text.split()) for language, text in _STOPWORD_TEXT.items()
}
ALL_STOPWORDS = frozenset().union(*STOPWORDS_BY_LANGUAGE.values())
_TELLING = {
    language: STOPWORDS_BY_LANGUAGE[language] | frozenset(text.split())
    for language, text in _CHAT_TEXT.items()
}
_SHARE = {
    word: 1 / sum(word in telling for telling in _TELLING.values())
    for word in frozenset().union(*_TELLING.values())
}
# Letters written in one of the five languages only.
_LETTERS = {"de": "ßäöü", "es": "ñ¿¡áíóú", "fr": "çœêâîôûëïÿ", "it": "ìòù"}


def message_language(text: str, *, preferred: str | None = None) -> str | None:
    """The language whose common words weigh most in `text`; on a tie, the one whose own
    letters it uses, then `preferred` if it is among the leaders; None when none leads (a
    message too short or too mixed to tell)."""
    counts = dict.fromkeys(LANGUAGES, 0.0)
    for word in words(text):
        for language, telling in _TELLING.items():
            if word in telling:
                counts[language] += _SHARE[word]
    best = max(counts.values())
    if not best:
        lettered = _lettered(text, LANGUAGES)
        return lettered[0] if len(lettered) == 1 else None
    leaders = [language for language, count in counts.items() if best - count < 1e-9]
    if len(leaders) > 1:
        lettered = [
            language
            for language in leaders
            if any(c in text.casefold() for c in _LETTERS.get(language, ""))
        ]
        if len(lettered) == 1:
            return lettered[0]
        if preferred in leaders:
            return preferred
        return None
    return leaders[0]


def _lettered(text: str, languages) -> list[str]:
    """Those of `languages` whose own letters `text` uses."""
    folded = text.casefold()
    return [code for code in languages if any(c in folded for c in _LETTERS.get(code, ""))]
