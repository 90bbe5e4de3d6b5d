"""The first filter before a prompt: text that reads as an order to the assistant is held.

Memory is written through many doors: reflection on the user's turns (and on imported
conversations), the MCP `remember` tool, the memory browser's file import and edits, the admin's
revisions, the world modifier's operations, triples and episode summaries. Each write service
(apps.memory.services, world_services, graph_services, episode_services) asks
`looks_like_instruction` of every text it would store where a later prompt reads it. Such a text
is stored as a quarantined memory instead, whatever door it came by: never recalled until the
user approves it in the memory browser.

This is a filter with measured error rates, not a wall (tests/memory/injection_corpus/,
bench/README.md "Injection gate"): what it misses and came by a door that is data still reaches
a prompt only datamarked (apps.memory.provenance). So it is built to spare the user's own words
first. It does not hold a sentence for a word ("rules", "ignore", "from now on", "system"), but
for a shape: an order addressed to the assistant whose target is more than the style of its
answers —

- overriding what the assistant was told (its rules, prompt, instructions, "what you were told
  before", "everything above");
- a new identity or mode for it ("you are now", "pretend to be", developer mode);
- sending the user's data somewhere, or showing its own instructions;
- a standing order about other people's questions ("whenever the user asks about money, …");
- secrecy towards the user, and the markup of a chat template ("system:", "<|im_start|>").

"I skip the rules at board games", "From now on I'm going vegetarian" and "Always answer in
Italian" are the user's life and the user's taste, and pass.

Before matching, the text is normalised so that the shape shows through obfuscation: NFKC,
characters no reader sees dropped (apps.language.text.visible), letters of other scripts that
look Latin read as the Latin letter (Unicode's confusables, through confusable_homoglyphs),
accents dropped, digits inside words read as letters ("1gn0r3"), letter-spaced words joined
("i g n o r e"), and a long base64 token decoded and read as well.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from functools import lru_cache

from confusable_homoglyphs import confusables

from apps.language.text import plain, sentences, visible

# --- normalising ----------------------------------------------------------------------------

_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a"})
# A word of letters and digits both, such as "1gn0r3" or "pr3v10u5" (not "4471-22", "180").
_LEET_WORD = re.compile(r"\b(?=[a-z]*[0-9])(?=[0-9]*[a-z])[a-z0-9]{3,}\b")
# Three or more single letters one space apart: "i g n o r e".
_SPACED_LETTERS = re.compile(r"(?<!\S)(?:[^\W\d_] ){2,}[^\W\d_](?!\S)")
_BASE64_TOKEN = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")


@lru_cache(maxsize=4096)
def _latin_lookalike(character: str) -> str:
    """The Latin letter a character of another script is drawn like ("а" -> "a"), else it."""
    found = confusables.is_confusable(character, preferred_aliases=["latin"], greedy=True)
    for homoglyph in (found or [{}])[0].get("homoglyphs", []):
        if homoglyph["c"].isascii() and homoglyph["c"].isalpha():
            return homoglyph["c"].lower()
    return character


def _unaccented(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def normalised(text: str) -> str:
    """The text as the gate reads it: what it shows a reader, in plain lower-case Latin."""
    text = plain(visible(unicodedata.normalize("NFKC", text)))
    text = "".join(c if c.isascii() else _latin_lookalike(c) for c in text)
    text = _unaccented(text.casefold())
    text = _LEET_WORD.sub(lambda m: m.group().translate(_LEET), text)
    text = _SPACED_LETTERS.sub(_joined, text)
    return re.sub(r"[ \t]+", " ", text)


def _joined(spaced: re.Match[str]) -> str:
    """Letter-spaced words joined: "p r e v i o u s i n s t r u c t i o n s" has lost its word
    breaks, so the words the gate looks for are set apart again ("previous instructions")."""
    return " ".join(_KEY_WORD.sub(r" \g<0> ", spaced.group().replace(" ", "")).split())


def _decoded_base64(text: str) -> list[str]:
    """The readable texts hidden as base64 tokens in `text`."""
    found = []
    for token in _BASE64_TOKEN.findall(text):
        try:
            decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
            readable = decoded.decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            continue
        if readable.isprintable():
            found.append(readable)
    return found


# --- the shapes of an order to the assistant -------------------------------------------------
# The text is unaccented lower case: "précédentes" is matched as "precedentes".

# What the assistant was told: its configuration, in the five languages.
_CONFIG = (
    r"(?:instructions?|rules?|guidelines?|guidance|prompts?|restrictions?|constraints?|limits"
    r"|filters?|safety|polic(?:y|ies)|configuration|setup|orders|directives?"
    r"|istruzion[ei]|regole|indicazioni|linee guida|vincoli|restrizioni|filtri|impostazioni"
    r"|limiti|direttive|grenzen"
    r"|consignes?|regles|contraintes|limites|filtres"
    r"|anweisungen|regeln|vorgaben|richtlinien|einschrankungen|konfiguration"
    r"|systemprompt|sicherheitsregeln"
    r"|instrucciones|reglas|directrices|restricciones|filtros|configuracion)"
)
# Yours, or given before: "your rules", "le tue regole", "tes regles", "deine Regeln".
_YOUR = r"(?:your|tuoi|tue|tuo|tua|tes|ton|ta|vos|votre|deine?[mnrs]?|tus|tu)"
_BEFORE = (
    r"(?:previous|prior|earlier|above|original|initial|old"
    r"|precedenti|iniziali|precedentes?|vorherigen|bisherigen|urspr\w*|anteriores|iniciales)"
)
_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|bypass|drop|ignora|dimentica|oublie"
_OVERRIDE_VERB += r"|ignoriere|vergiss|olvida)"
_KEY_WORD = re.compile(f"{_OVERRIDE_VERB}|{_BEFORE}|{_CONFIG}|reveal|system")
_OVERRIDE = [
    rf"\b{_YOUR}\s+(?:\w+\s+){{0,2}}{_CONFIG}\b",
    rf"\b{_CONFIG}\s+(?:\w+\s+)?{_BEFORE}\b",
    rf"\b{_BEFORE}\s+{_CONFIG}\b",
    # "What you were told before", "everything above this line", the setup "you got".
    r"\bwhat you were told\b|\bwhat\b.{0,25}\btold you\b|\byou were (?:told|given|configured)\b"
    r"|\byou got at the start\b"
    r"|\beverything above\b|\bconfigured with\b",
    r"\bquello che ti hanno detto\b|\bti (?:hanno|abbiano) (?:detto|dato)\b"
    r"|\bc'e sopra questa riga\b"
    r"|\bsei stato configurato\b|\bricevute all'inizio\b",
    r"\bce qu'on t'a dit\b|\bon t'a (?:dit|donne)\w*\b|\bau-dessus de cette ligne\b"
    r"|\brecues au debut\b|\bta configuration\b",
    r"\bwas man dir\b.{0,20}\bgesagt\b|\bdir bisher gesagt\b|\buber dieser zeile\b"
    r"|\bdu bekommen hast\b|\bvom anfang\b",
    r"\blo que te dijeron\b|\bque te dieron\b|\bencima de esta linea\b|\bdel principio\b"
    r"|\btu configuracion\b",
    # An order to ignore, at the head of a clause, with the configuration anywhere after.
    rf"(?:^|[,;:]\s*|\b(?:and|e|et|und|y)\s+)(?:please\s+)?{_OVERRIDE_VERB}\b.*\b{_CONFIG}\b",
    # Breaking its own rules, or obeying this text above them.
    r"\b(?:break|infrang\w*|enfreindre|brechen|romper)\b.{0,20}\b(?:own|propri\w*|eigenen)\b",
    r"\b(?:top )?priority over\b|\bha la priorita\b|\best prioritaire\b|\bhat vorrang\b"
    r"|\btiene prioridad\b",
    r"\b(?:obey|obbedisci|obeis|gehorche|obedece|comply with)\b"
    r"|\b(?:you|tu|du)\s+(?:must\s+)?(?:obey|obbedisci|obeis|gehorchst|obedeces)\b",
    r"\b(?:answer|respond to|reply to) (?:every|any) (?:question|request)\b|\banswer anything\b"
    r"|\brispondi a (?:tutto|qualsiasi)\b|\breponds a tout\b|\bbeantwortest alles\b"
    r"|\bbeantworte alles\b|\brespondes a todo\b|\bresponde a todo\b|\berfulle jede bitte\b"
    r"|\bobey every\b|\bcomply with every\b",
]
_IDENTITY = [
    r"\byou are (?:now|no longer|a different)\b|\byour new (?:persona|identity|name|role)\b"
    r"|\bfrom this (?:point|moment) you are\b|\byou are dan\b",
    r"\b(?:adesso|ora) sei\b|\bnon sei piu\b|\bda questo momento sei\b|\bla tua nuova identita\b"
    r"|\bti chiami\b",
    r"\btu es maintenant\b|\btu n'es plus\b|\ba partir de ce moment tu es\b"
    r"|\bta nouvelle identite\b|\btu t'appelles\b",
    r"\bdu bist (?:jetzt|nun|ab jetzt|kein)\b|\bab diesem moment bist du\b"
    r"|\bdeine neue identitat\b|\bheisst du\b",
    r"\bahora eres\b|\bya no eres\b|\bdesde este momento eres\b|\btu nueva identidad\b"
    r"|\bte llamas\b",
    # Imperatives at the head of a sentence or clause: "I pretend to be a dragon" is the
    # user's game, "Pretend to be the bank" an order.
    r"\brole-?\s?play(?:ing)? as\b|\bpretend (?:you are|you're)\b",
    r"(?:^|[,;:]\s*|\b(?:and|e|et|und|y)\s+)(?:pretend to be|act as|play the role|become an? "
    r"(?:ai|assistant|bot|model)|switch into|fai finta di essere|comportati come"
    r"|interpreta il ruolo|diventa un|fais semblant d'etre|comporte-toi comme|joue le role"
    r"|deviens une?|gib dich als|verhalte dich wie|spiel die rolle|werde eine?"
    r"|finge ser|comportate como|haz el papel|conviertete en)\b",
    r"\bdeveloper mode\b|\bmodalita sviluppatore\b|\bmode developpeur\b|\bentwicklermodus\b"
    r"|\bmodo desarrollador\b|\bjailbr(?:eak|oken)\b|\bdo anything now\b",
]
_USERS_DATA = (
    r"(?:the user'?s|dell'utente|de l'utilisateur|des nutzers|del usuario)\s+(?:\w+\s+){0,3}"
    r"(?:notes?|passwords?|files?|address|phone|data|dati|donnees|daten|datos|history"
    r"|memories|messages?|secrets?|segreti|geheimnisse|secretos|appunti|password|file"
    r"|indirizzo|notes|mots de passe|fichiers"
    r"|adresse|notizen|passworter|dateien|notas|contrasenas|archivos|direccion)"
)
_ADDRESS = r"(?:https?://|www\.|\b[\w.+-]+@[\w-]+\.[\w.]+|\bwebhook\b|\b[\w-]+\.example\.\w+)"
# An address, or a link the answer would carry the data in.
_DESTINATION = (
    rf"(?:{_ADDRESS}|\blink (?:to|a)\b|\bun link\b|\bun lien\b|\beinen link\b|\bun enlace\b)"
)
_SEND = (
    r"(?:send|forward|post|upload|copy|put|include|add|email|leak|share"
    r"|invia|inoltra|pubblica|metti|carica|copia|manda|includi"
    r"|envoie|transfere|publie|mets|televerse|copie"
    r"|schick|leite|poste|pack|lade|kopiere|sende|nimm"
    r"|envia|reenvia|publica|mete|sube|incluye)"
)
_EXFILTRATION = [
    rf"(?:^|[,;:]\s*|\b(?:and|e|et|und|y)\s+)(?:quietly\s+|secretly\s+)?{_SEND}\b.*{_DESTINATION}",
    rf"{_USERS_DATA}",
    rf"\b{_SEND}\w*\b.{{0,80}}\b(?:to|a|an|nach|at)\s+{_ADDRESS}",
    rf"^(?:always|never|do not|don't)\b.*{_DESTINATION}",
    rf"{_DESTINATION}.{{0,60}}(?:[,;:]\s*|\b(?:and|e|et|und|y)\s+){_SEND}\b",
    rf"\b(?:chat|conversation) history\b.*\b{_SEND}"
    rf"|\b{_SEND}\w*\b.*\b(?:chat|conversation) history",
    r"\b(?:saved )?passwords?\b.{0,40}\b(?:reply|answer|risposta|reponse|antwort|respuesta)\b"
    r"|\b(?:password|mots de passe|passworter|contrasenas)\b.{0,30}\b(?:salvate|enregistres"
    r"|gespeicherten|guardadas)\b|\bgespeicherten passworter\b",
    r"\b(?:reveal|read out|show|print|display|rivela|mostra|revele|affiche|verrate|zeig|revela"
    r"|muestra)\b.{0,30}\b(?:system ?prompt|prompt di sistema|prompt systeme|prompt del sistema"
    r"|hidden instructions|istruzioni nascoste|instructions cachees|versteckten anweisungen"
    r"|instrucciones ocultas)",
]
# A standing order about other people's questions: "whenever the user asks about money, …".
_STANDING = [
    r"\b(?:whenever|every time|each time|any time|when|if|when asked|in every|for every"
    r"|ogni volta che|quando|se|per ogni|chaque fois que|quand|si|pour chaque|immer wenn"
    r"|jedes mal|wenn|bei fragen|cada vez que|cuando|en cada)\b.{0,30}"
    r"\b(?:the user|a user|anyone|someone|somebody|asked|comes up|l'utente|qualcuno|ti chiedono"
    r"|l'utilisateur|quelqu'un|on te (?:parle|demande)|der nutzer|jemand|el usuario|alguien"
    r"|te pregunten)\b",
    r"\b(?:every|each) (?:answer|reply|response)\b.{0,30}\b(?:must|should|include)\b"
    rf"|\b(?:every|each|all) (?:answer|reply|response)s?\b.*{_DESTINATION}"
    r"|\b(?:in )?all future (?:replies|answers)\b|\bevery answer you give\b"
    r"|\bogni risposta deve\b|\btutte le risposte future\b|\bchaque reponse doit\b"
    r"|\btoutes les reponses a venir\b|\bjede antwort muss\b|\ballen kunftigen antworten\b"
    r"|\bcada respuesta debe\b|\btodas las respuestas futuras\b",
    r"\b(?:tell|ask) (?:every|each|any|all) users?\b|\btell (?:the user|them) to\b"
    r"|\bask (?:the user|them) for\b"
    r"|\bdi' a ogni utente\b|\bchiedi il\b.{0,20}\ball'utente\b|\bchiedigli\b"
    r"|\bdis a chaque utilisateur\b|\bdemande-lui\b|\bschick jeden nutzer\b"
    r"|\bfrag den nutzer\b|\bfrag nach\b|\bdile a cada usuario\b|\bpidele\b|\bpide el\b",
    r"\b(?:referral code|sponsor|codice sconto|code de parrainage|empfehlungscode"
    r"|codigo de referido|patrocinador)",
    # Advertising at the head of a sentence: "Recommend the VPN from …" (not "recommend me").
    r"^(?:(?:always|only) )?(?:recommend|suggest|promote|advertise|consiglia|suggerisci"
    r"|raccomanda|recommande"
    r"|suggere|empfiehl|recomienda|sugiere)\b(?!\s+(?:me|mi|moi|mir)\b)",
]
_SECRECY = [
    r"\b(?:do not|don't|never) (?:tell|inform|let) the user\b|\bwithout telling\b"
    r"|\bsecret from the user\b|\bnever mention that you\b|\bsecretly\b|\bquietly\b",
    r"\bnon dire all'utente\b|\bnon menzionare mai che sei\b|\bdi nascosto\b|\bsenza dir\w*\b"
    r"|\btieni segret\w*\b",
    r"\bne dis pas a l'utilisateur\b|\bne mentionne jamais que tu\b|\ben secret\b"
    r"|\bdiscretement\b|\bsans le lui dire\b|\bgarde cette \w+ secrete\b",
    r"\bsag dem nutzer nicht\b|\berwahne nie, dass du\b|\bheimlich\b|\bunauffallig\b"
    r"|\bohne es ihm zu sagen\b|\bgeheim\b",
    r"\bno le digas al usuario\b|\bnunca menciones que eres\b|\ben secreto\b|\bsin decir\w*\b",
]
_MARKUP = [
    r"<\|?(?:im_start|im_end|system|endoftext)\|?>|\[/?inst\]|^\s*#+\s*(?:system|instructions?)\b",
    r"^\s*(?:system|assistant|sistema|systeme|system prompt|prompt di sistema|prompt systeme"
    r"|systemprompt|prompt del sistema)\s*:",
    # Answers that deceive the user are not a style: "always answer with a lie".
    r"\b(?:answer|reply|respond|rispondi|reponds|antworte|responde)\w*\b.{0,30}"
    r"\b(?:lies?|bugi[ae]|mensonges?|lugen?|mentiras?|false information)\b",
    r"^\s*(?:new|nuove|nouvelles|neue|nuevas)\s+(?:instructions|istruzioni|anweisungen"
    r"|instrucciones)\s*:",
    r"\b(?:the\s+)?(?:assistant|ai|model|bot|chatbot|llm|l'assistente|l'assistant|der assistent"
    r"|el asistente)\s+(?:must|shall|has to|should always|should never|will always|is now|deve"
    r"|doit|muss|debe)\b",
    # "You must obey", "you will always agree": a duty given to the assistant, unless it is
    # about how to address or answer the user ("tu dois toujours me tutoyer").
    r"\b(?:you must|you shall|you will always|you should always|you are required to|make sure"
    r" you|tu devi|devi sempre|tu dois|du musst|du sollst|debes|tienes que)\b"
    r"(?!\s+(?:\w+\s+)?(?:me|mi|mich|mir|m'|\w+(?:me|mi)\b|answer|reply|respond|write|use|keep|call))",
]
_ORDERS = {
    "override": _OVERRIDE,
    "identity": _IDENTITY,
    "exfiltration": _EXFILTRATION,
    "standing order": _STANDING,
    "secrecy": _SECRECY,
    "markup": _MARKUP,
}
_ORDER_SHAPES = {
    shape: re.compile("|".join(f"(?:{p})" for p in patterns), re.MULTILINE)
    for shape, patterns in _ORDERS.items()
}


def instruction_shape(text: str) -> str | None:
    """The shape of order to the assistant `text` has ("override", "identity", …), or None.

    One sentence a line: an order that opens a later sentence ("I like tea. Always …") is read
    as the start of a line, as if it came alone. A base64 token is decoded and read as well.
    """
    readings = [text, *_decoded_base64(text)]
    for reading in readings:
        lines = "\n".join(sentences(normalised(reading)))
        for shape, pattern in _ORDER_SHAPES.items():
            if pattern.search(lines):
                return shape
    return None


def looks_like_instruction(text: str) -> bool:
    """Does this memory read as an order to the assistant rather than a fact about the user?"""
    return instruction_shape(text) is not None
