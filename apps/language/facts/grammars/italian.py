"""Italian: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

# fmt: off
_RELATIVES = {
    "figlia": Relation("daughter", "la"), "figlio": Relation("son", "il"),
    "figli": Relation("child", "i"), "bambina": Relation("daughter", "la"),
    "bambino": Relation("son", "il"), "bambini": Relation("child", "i"),
    "moglie": Relation("wife", "la"), "marito": Relation("husband", "il"),
    "compagno": Relation("partner", "il"), "compagna": Relation("partner", "la"),
    "ragazza": Relation("girlfriend", "la"), "ragazzo": Relation("boyfriend", "il"),
    "fidanzata": Relation("girlfriend", "la"), "fidanzato": Relation("boyfriend", "il"),
    "madre": Relation("mother", "la"), "mamma": Relation("mother", "la"),
    "padre": Relation("father", "il"), "papà": Relation("father", "il"),
    "sorella": Relation("sister", "la"), "sorelle": Relation("sister", "le"),
    "fratello": Relation("brother", "il"), "fratelli": Relation("brother", "i"),
    "nonna": Relation("grandmother", "la"), "nonno": Relation("grandfather", "il"),
    "zia": Relation("aunt", "la"), "zio": Relation("uncle", "lo"),
    "cugina": Relation("cousin", "la"), "cugino": Relation("cousin", "il"),
    "nipote": Relation("nephew", "il"), "amico": Relation("friend", "l'"),
    "amica": Relation("friend", "l'"), "migliore amica": Relation("friend", "la"),
    "migliore amico": Relation("friend", "il"), "capo": Relation("boss", "il"),
    "collega": Relation("colleague", "il"), "coinquilino": Relation("roommate", "il"),
    "coinquilina": Relation("roommate", "la"), "bimbi": Relation("child", "i"),
    "bimbe": Relation("daughter", "le"), "bimbo": Relation("son", "il"),
    "bimba": Relation("daughter", "la"), "nipotini": Relation("grandchild", "i"),
    "nipoti": Relation("grandchild", "i"), "suocera": Relation("mother-in-law", "la"),
    "suocero": Relation("father-in-law", "il"), "porcellino d'india": Relation("guinea pig", "il", pet=True), "figlie": Relation("daughter", "le"),
    "cane": Relation("dog", "il", pet=True), "cagnolino": Relation("dog", "il", pet=True),
    "cagnolina": Relation("dog", "la", pet=True), "cagna": Relation("dog", "la", pet=True),
    "gatto": Relation("cat", "il", pet=True), "gatta": Relation("cat", "la", pet=True),
    "gattino": Relation("cat", "il", pet=True), "gatti": Relation("cat", "i", pet=True),
    "cani": Relation("dog", "i", pet=True), "coniglio": Relation("rabbit", "il", pet=True),
    "criceto": Relation("hamster", "il", pet=True), "cavallo": Relation("horse", "il", pet=True),
    "pappagallo": Relation("parrot", "il", pet=True), "tartaruga": Relation("tortoise", "la", pet=True),
}
_IO = r"(?:io\s+)?(?:{ADV})?"
_TO = r"(?:(?:alla|alle|allo|agli|ai|al|ad|a)\s+|all')"
_DIETS = r"astemi[oa]|vegetarian[oa]|vegan[oa]|pescetarian[oa]|crudist[oa]|flexitarian[oa]"
_CONDITIONS = (r"(?:il\s+|l')?(?:alzheimer|parkinson|demenza|diabete(?: di tipo [12])?|asma|celiachia|epilessia|emicrania|"
               r"(?:un'|l')?allergia\s+\S+(?:\s+\S+)?|(?:un'|l')?intolleranza\s+\S+(?:\s+\S+)?)")
_DIAGNOSED = r"celiac[oa]|diabetic[oa]|intollerante al \w+|incinta|asmatic[oa]|epilettic[oa]"

GRAMMAR = Grammar(
    code="it",
    openers=r"^(?:(?:ah e|oh e|ah|oh|e|ed|anche|inoltre|comunque|cmq|allora|quindi|beh|be'|ok|okay|buongiorno|buonasera|salve"
    r"|sì|grazie|ciao|salve|ehi|senti|tra l'altro|fra l'altro|a proposito|per la cronaca|per info"
    r"|per tua info|ps|btw|ora|adesso|attualmente|in questo periodo|al momento|oggi|ultimamente"
    r"|ormai|ecco|dunque|tipo|piccola presentazione|presentazione|correzione|scusa|anzi|in realtà"
    r"|a dire il vero|onestamente|sinceramente|da qualche anno|da poco|piacere|mi presento)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:e|ed|ma|però|mentre|quindi|perciò)\s+"
    r"(?=(?:io|mi|mio|mia|miei|mie|ho|sono|vivo|abito|sto|lavoro|faccio|studio|parlo|adoro|amo|odio"
    r"|preferisco|vengo|da|ora|adesso|ormai|il mio|la mia)\b)|,\s+(?!(?:e|ma|o|anche|per favore|non)\b)(?=\S)"
    r"|(?<!non)\s+(?=(?:ho \d{1,3} anni|vivo a|abito a|lavoro come|mi chiamo)\b)",
    negation=r"\b(?:non|mai|né|nessun\w*|niente|nulla|neanche|nemmeno|neppure)\b",
    unreal=r"\b(?:se|vorrei|vorremmo|piacerebbe|sogno|spero|speriamo|forse|magari|potrei|dovrei"
    r"|voglio|intendo|penso di|ho intenzione|prima o poi|un giorno|sarebbe|immagina)\b",
    conditional=r"\b(?:se|qualora|immagina|supponiamo|quando)\b",
    passing=r"\b(?:questa settimana|questo weekend|questo fine settimana|per qualche giorno"
    r"|per il weekend|in vacanza|in ferie|in viaggio|per lavoro|di passaggio|in trasferta"
    r"|temporaneamente|per ora|da (?:mia|mio|miei|un amico|un'amica|amici|parenti)|ospite)\b",
    past=r"\b(?:prima|una volta|un tempo|ex|abitavo|vivevo|lavoravo|ero|avevo|facevo|studiavo"
    r"|fino a|finché|più)\b",
    user_frames=[
        Frame("name", _IO + r"mi chiamo\s+(?P<v>.+)"),
        Frame("name", r"(?:il\s+)?mio nome è\s+(?P<v>.+)|nome\s*:\s*(?P<v2>.+)"),
        Frame("name", r"(?:puoi |potete )?chiamarmi\s+(?P<v>.+)|chiamami\s+(?P<v2>.+)", template="weak"),
        Frame("name", r"(?:io\s+)?sono\s+(?P<v>[^\s,]+(?:\s+[^\s,]+)?)$", template="weak", decoy=False),
        Frame("name", r"(?P<v>\S+) qui$|qui (?:è|e') (?P<v2>\S+)$", template="here", decoy=False),
        Frame("age", _IO + r"ho\s+(?P<v>\d{1,3})\s+anni\b"),
        Frame("age", r"(?:ho\s+)?(?:appena\s+)?compiuto\s+(?P<v>\d{1,3})\s+anni|età\s*:\s*(?P<v2>\d{1,3})"),
        Frame("home", _IO + r"(?:vivo|abito|risiedo)\s+(?:{ADV})?(?:con\s+(?:(?:la|il|i|le)\s+)?(?:mia|mio|miei|mie|nostr[aoie])\s+[^,]+?\s+)?(?:a|ad|in|nel|nella|nei|vicino a|alle porte di|fuori|dalle parti di)\s+(?P<v>.+)"),
        Frame("home", r"(?:abitiamo|viviamo|stiamo)\s+(?:{ADV})?(?:a|ad|in|nel|nella|vicino a)\s+(?P<v>.+)"),
        Frame("home", r"(?:io\s+)?(?:{ADV})?sto\s+(?:{ADV})?(?:a|ad|in)\s+(?P<v>.+)"),
        Frame("home", r"(?:casa mia|la mia casa) è\s+(?:a|ad|in)\s+(?P<v>.+)"),
        Frame("home", r"(?:mi sono|ci siamo)\s+(?:{ADV})?(?:trasferit[oaie]|stabilit[oaie])\s+(?:a|ad|in)\s+(?P<v>.+)"),
        Frame("home", r"(?:città|residenza|vivo)\s*:\s*(?P<v>.+)"),
        Frame("origin", _IO + r"sono\s+(?:{ADV})?(?:originari[oa]\s+)?(?:di|da)\s+(?P<v>.+)"),
        Frame("origin", _IO + r"vengo\s+(?:{ADV})?(?:da|dalla|dal|dall')\s*(?P<v>.+)"),
        Frame("origin", r"(?:io\s+)?(?:sono\s+)?(?:nat[oa]|cresciut[oa])\s+(?:e cresciut[oa]\s+)?(?:a|ad|in)\s+(?P<v>.+)"),
        Frame("origin", r"originari[oa] (?:di|della|del)\s+(?P<v>.+)|(?:origine|provenienza)\s*:\s*(?P<v2>.+)"),
        Frame("studies", _IO + r"studio\s+(?P<v>.+)"),
        Frame("studies", r"(?:sono\s+)?(?:un[oa']?\s+)?(?:dottorand[oa]|studente|studentessa|laureand[oa]|specializzand[oa])\s+(?:in|di)\s+(?P<v>.+)"),
        Frame("studies", r"(?:sto studiando|studiando)\s+(?P<v>.+)"),
        Frame("studies", _IO + r"(?:sono|faccio)\s+(?:uno\s+|una\s+)?(?:studente|studentessa)\s+(?:di|in)\s+(?P<v>.+)"),
        Frame("studies", r"(?:faccio|sto facendo|frequento)\s+(?:un |il |la )?(?:dottorato|master|laurea|triennale|magistrale|corso|facoltà)\s+(?:di|in)\s+(?P<v>.+)"),
        Frame("occupation", _IO + r"lavoro\s+(?:{ADV})?come\s+(?P<v>.+?)(?:\s+(?:presso|per|alla|al)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", _IO + r"faccio\s+(?:il|la|l'|lo)\s*(?P<v>.+)"),
        Frame("occupation", r"(?:il\s+)?mio (?:lavoro|mestiere) è\s+(?P<v>.+)|di mestiere (?:faccio|sono)\s+(?P<v2>.+)"),
        Frame("occupation", r"(?:lavoro|mestiere|professione|occupazione)(?:-wise)?\s*:\s*(?P<v>.+)"),
        Frame("occupation", _IO + r"sono\s+(?:{ADV})?(?:un|una|un'|uno)?\s*(?P<v>.+?)(?:\s+(?:presso|alla|al|all')\s+(?P<org>.+))?$", decoy=False),
        Frame("occupation", _IO + r"insegno\s+(?P<v>.+)", template="teach"),
        # Where, then the job: "lavoro a Milano come infermiera", "lavoro da casa come traduttrice".
        Frame("occupation", _IO + r"lavoro\s+(?:{ADV})?(?:a|ad|da)\s+\S.*?\s+come\s+(?P<v>.+)$", explicit=True),
        Frame("employer", _IO + r"lavoro\s+(?:{ADV})?(?:presso|per|alla|al|all'|nella|nel|in)\s+(?P<v>.+?)(?:\s+come\s+(?P<job>.+))?$"),
        Frame("languages", _IO + r"parlo\s+(?P<v>.+)"),
        Frame("languages", r"(?:la\s+)?mia lingua madre è\s+(?P<v>.+)|sono madrelingua\s+(?P<v2>.+)"),
        Frame("answers", r"(?:(?:puoi|potresti|potete)\s+)?(?:per favore\s+)?(?:sempre\s+)?(?:{STANDING}\s+)?(?:spiegami|spiegarmi|rispondimi|rispondi|rispondere|rispondermi|scrivimi|scrivi|scrivere|dammi|mi dai|mi dia|tieni)(?:\s+(?:le|delle)\s+risposte)?\s+(?P<v>.+)", template="request"),
        Frame("answers", r"(?:(?:the|des|les|unas|las|le|die|delle)\s+)?(?:answers|replies|réponses|respuestas|risposte|antworten)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"(?:io\s+)?preferisco\s+(?P<v>(?:le\s+)?risposte\b.*)", template="whole"),
        Frame("answers", r"(?:per favore\s+)?niente\s+(?P<v>.+?)\s+nelle (?:tue\s+)?risposte\b.*", template="without"),
        Frame("dislikes", _IO + r"(?:odio|detesto|non sopporto|non mi piace|non mi piacciono)\s+(?:per niente\s+)?(?P<v>.+)"),
        Frame("likes", _IO + r"(?:adoro|amo|preferisco)\s+(?P<v>.+)"),
        Frame("likes", r"(?:a me\s+)?mi\s+(?:piace|piacciono)\s+(?:molto\s+|tanto\s+|tantissimo\s+|un sacco\s+|davvero\s+|proprio\s+)?(?P<v>.+)"),
        Frame("likes", _IO + r"(?:sono\s+)?(?:(?:un|una)\s+)?(?:grande\s+)?(?:appassionat[oa]|fan|fissat[oa]|patit[oa]|tifos[oa])\s+(?:di|del|della|dei|delle|dello|degli)\s+(?P<v>.+)"),
        Frame("likes", r"(?:il\s+)?mio \w+ preferito è\s+(?P<v>.+)|(?:la\s+)?mia \w+ preferita è\s+(?P<v2>.+)"),
        Frame("likes", r"(?:hobby|passion[ei]|interessi)\s*:\s*(?P<v>.+)"),
        Frame("likes", r"(?:ho\s+)?(?:{ADV})?(?:iniziato|cominciato)\s+(?:a|ad)\s+(?P<v>.+)"),
        Frame("likes", r"(?:sto imparando|imparo)\s+(?P<v>.+)", decoy=False),
        Frame("diet", _IO + r"sono\s+(?:{ADV})?(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", _IO + r"(?:non mangio(?:\s+più)?|ho smesso di mangiare|ho rinunciato (?:a|al|alla|agli|ai|all')|ho eliminato|evito|non posso mangiare|non bevo(?:\s+più)?)\s*(?P<v>.+)"),
        Frame("origin", _IO + r"sono\s+(?:{ADV})?(?:di origine\s+)?(?P<v>\S+)$|(?:di origine|origini)\s+(?P<v2>\S+)$", template="demonym", decoy=False),
        Frame("health", _IO + r"(?:sono\s+)?(?:{ADV})?(?:gravemente\s+)?(?:allergic[oa]|intollerante)\s+" + _TO + r"(?P<v>.+)"),
        Frame("health", _IO + r"(?:ho|soffro di)\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("health", _IO + r"sono\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("age", r"(?P<v>\d{2})(?:\s+anni)?$", fragment=True, decoy=False),
        Frame("occupation", r"(?:un|una|un')?\s*(?P<v>[^\d,]+?)$", fragment=True, decoy=False),
        Frame("employer", r"(?:presso|alla|al)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("origin", r"(?:di|da)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("name", r"(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+)?)$", template="here", fragment=True, decoy=False),
    ],
    other_frames=[
        Frame("relative_name", r"\s+(?:si chiama|si chiamano|di nome|sono)\s+(?P<v>.+)"),
        Frame("age", r"\s+ha\s+(?P<v>\d{1,3})\s+anni|\s+(?:di|da)\s+(?P<v2>\d{1,3})\s+anni"),
        Frame("home", r"\s+(?:vive|abita)\s+(?:a|ad|in|nel|nella)\s+(?P<v>.+)"),
        Frame("origin", r"\s+(?:è|viene)\s+(?:di|da|dalla|dal)\s+(?P<v>.+)"),
        Frame("occupation", r"\s+lavora come\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r"\s+(?:fa\s+(?:il|la|l')\s*|è\s+(?:un|una|un')?\s*)(?P<v>.+)"),
        Frame("employer", r"\s+lavora\s+(?:presso|per|alla|al)\s+(?P<v>.+)"),
        Frame("studies", r"\s+studia\s+(?P<v>.+)"),
        Frame("languages", r"\s+parla\s+(?P<v>.+)"),
        Frame("health", r"\s+è\s+(?:gravemente\s+)?(?:allergic[oa]|intollerante)\s+" + _TO + r"(?P<v>.+)"),
        Frame("health", r"\s+(?:ha|soffre di)\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("diet", r"\s+non\s+(?:può|deve|mangia|beve)\s+(?:mangiare\s+|bere\s+|avere\s+)?(?P<v>.+)"),
        Frame("diet", r"\s+è\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("health", r"\s+è\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("dislikes", r"\s+(?:odia|detesta|non sopporta)\s+(?P<v>.+)"),
        Frame("likes", r"\s+(?:adora|ama|suona|gioca a)\s+(?P<v>.+)"),
    ],
    possessive=r"(?:la mia|il mio|le mie|i miei|mia|mio|mie|miei|la nostra|il nostro|le nostre|i nostri|nostra|nostro)",
    relations=_RELATIVES,
    having=r"(?:io\s+)?(?:ho|abbiamo)",
    numbers=r"(?:un|una|un'|uno|due|tre|quattro|cinque|\d)",
    counted=r"(?:due|tre|quattro|cinque|[2-9])",
    naming=r"(?:di nome|che si chiama|che si chiamano|chiamat[oaie])",
    with_words="con|insieme a",
    value_ends=r"\s*[,;:!?()]|(?<!\bst)(?<!\bdr)\.|\s+(?:lol|haha|ahah|jaja|jeje|xd|mdr|ptdr)\b|\s+(?:e|ed|ma|o|perché|però|quindi|poiché|mentre|che|quando|se|con"
    r"|da quando|ormai|adesso|ora|anche|non)\b",
    vague=word_set("""questo questa questi queste quello quella quelli quelle ciò ti te tu voi
        vostro vostra tuo tua come quando cosa quanto che chi tutto niente qualcosa me stesso"""),
    place_leads=word_set("""un una piccolo piccola paese paesino borgo vicino a ad alle porte di
        periferia centro della del dei città provincia campagna nord sud est ovest zona fuori
        in nel nella pochi km da dalle parti"""),
    articles=word_set("il lo la l' i gli le un uno una un'"),
    indefinite=word_set("un uno una un'"),
    preps=word_set("a ad in di da per con su presso al alla all' nel nella dal dalla come"),
    standing=r"\b(?:d'ora in poi|da ora in poi|d'ora in avanti|da adesso in poi|da ora in avanti|sempre|in futuro|di default|ogni volta)\b",
    tomorrow=r"\bdomani\b",
    today=r"\b(?:oggi|stasera|stamattina|stanotte)\b",
    correction=r"^(?:(?:anzi|scusa|cioè|no|correzione|volevo dire)[,:!\s]+)*(?:è\s+)?(?P<new>[^,]+?),?\s+non\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:io|mi|mio|mia|miei|mie|ho|sono|vivo|abito|lavoro|faccio|studio|parlo|adoro|amo|odio|preferisco|vengo)\b",
    reported=r"\b(?:dice|dicono|ha detto|mi ha detto|pensa|secondo)\b",
    user_words=word_set("io me mi mio mia miei mie noi ci nostro nostra"),
    diets=_DIETS,
    takes_back=r"(?:^|[.,;!?]\s*)(?:anzi,?\s+no|anzi|no aspetta|aspetta,?\s+no|scusa,?\s+intendevo|intendevo|volevo dire|correzione)(?!\w)[\s,:!]*",
    no_longer=r"(?:^|[,;.!?\-–—]\s*)(?:(?:cioè|beh|o meglio|almeno),?\s+)?(?:lo\s+)?ero(?=\s*(?:[,;.!?)]|$))|\b(?:non più|non lo sono più)(?=\s*(?:[,;.!?)]|$))|(?:^|[,;.!?\-–—]\s*|\b(?:e|ma|ora|adesso)\s+)(?:sono\s+(?:ora\s+|adesso\s+)?)?(?:in pensione|pensionat[oa])\b",
    asked_back=r"[,;]\s*¿?(?:e|che|cosa|dove|come|chi|quale|quando|perché|di dove)\b[^,;]{0,40}?(?<!\w)(?:tu|te|ti|tuo|tua|tuoi|tue|voi|lei)(?!\w)[^,;]*\?\s*$",
    every_answer=r"\b(?:risposte|messaggi)\b",
    about_the_user=r"(?:,|\s+e|\s+ma)\s+(?:\S+\s+){0,2}(?:mi|me|io|ci)\b",
    closers=r"(?:\s*(?:\b(?:ahah\w*|haha\w*|lol|xd)\b|:\)|;\)|!+|[\U0001F300-\U0001FAFF\u2600-\u27BF]+))+\s*$",
    normal=((r"\bun'\s+", "un'"), (r"\bl'\s+", "l'"), (r"\bsn\b", "sono"), (r"\bnn\b", "non")),
    macros={
        "ADV": r"(?:(?:ora|adesso|attualmente|ancora|anche|già|appena|ormai|proprio|davvero|da anni"
        r"|da poco|ufficialmente|finalmente|orgogliosamente)\s+)+",
    },
)
# fmt: on
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
