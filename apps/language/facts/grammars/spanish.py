"""Spanish: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

# fmt: off
_RELATIVES = {
    "hija": Relation("daughter", "la"), "hijo": Relation("son", "el"),
    "hijos": Relation("child", "los"), "hijas": Relation("daughter", "las"),
    "esposa": Relation("wife", "la"), "mujer": Relation("wife", "la"),
    "esposo": Relation("husband", "el"), "marido": Relation("husband", "el"),
    "pareja": Relation("partner", "la"), "novia": Relation("girlfriend", "la"),
    "novio": Relation("boyfriend", "el"), "madre": Relation("mother", "la"),
    "mamá": Relation("mother", "la"), "padre": Relation("father", "el"),
    "papá": Relation("father", "el"), "hermana": Relation("sister", "la"),
    "hermano": Relation("brother", "el"), "hermanos": Relation("brother", "los"),
    "abuela": Relation("grandmother", "la"), "abuelo": Relation("grandfather", "el"),
    "tía": Relation("aunt", "la"), "tío": Relation("uncle", "el"),
    "prima": Relation("cousin", "la"), "primo": Relation("cousin", "el"),
    "sobrina": Relation("niece", "la"), "sobrino": Relation("nephew", "el"),
    "amigo": Relation("friend", "el"), "amiga": Relation("friend", "la"),
    "mejor amiga": Relation("friend", "la"), "mejor amigo": Relation("friend", "el"),
    "jefe": Relation("boss", "el"), "jefa": Relation("boss", "la"),
    "compañero de piso": Relation("roommate", "el"), "compañera de piso": Relation("roommate", "la"),
    "compañero": Relation("colleague", "el"), "compañera": Relation("colleague", "la"),
    "colega": Relation("colleague", "el"), "niño": Relation("son", "el"), "niña": Relation("daughter", "la"),
    "niños": Relation("child", "los"), "nietos": Relation("grandchild", "los"),
    "nietas": Relation("granddaughter", "las"), "nieto": Relation("grandson", "el"),
    "nieta": Relation("granddaughter", "la"), "hermanas": Relation("sister", "las"),
    "perro": Relation("dog", "el", pet=True), "perra": Relation("dog", "la", pet=True),
    "perros": Relation("dog", "los", pet=True), "gato": Relation("cat", "el", pet=True),
    "gata": Relation("cat", "la", pet=True), "gatos": Relation("cat", "los", pet=True),
    "cachorro": Relation("dog", "el", pet=True), "gatito": Relation("cat", "el", pet=True),
    "conejo": Relation("rabbit", "el", pet=True), "hámster": Relation("hamster", "el", pet=True),
    "caballo": Relation("horse", "el", pet=True), "cobaya": Relation("guinea pig", "la", pet=True),
    "suegra": Relation("mother-in-law", "la"), "suegro": Relation("father-in-law", "el"), "tortuga": Relation("tortoise", "la", pet=True), "loro": Relation("parrot", "el", pet=True),
}
_YO = r"(?:yo\s+)?(?:{ADV})?"
_DIETS = r"vegetarian[oa]|vegan[oa]|pescetarian[oa]|pescovegetarian[oa]|crudivegan[oa]|flexitarian[oa]"
_CONDITIONS = (r"(?:alzh[eé]imer|parkinson|demencia|diabetes(?: tipo [12])?|asma|celiaquía|epilepsia|migrañas|"
               r"(?:una\s+)?alergia\s+a(?:l)?\s+\S+(?:\s+\S+)?|(?:una\s+)?intolerancia\s+a(?:l|\s+la)?\s+\S+)")
_DIAGNOSED = r"celíac[oa]|diabétic[oa]|intolerante a la \w+|asmátic[oa]|epiléptic[oa]|sord[oa]|ciego|ciega"

GRAMMAR = Grammar(
    code="es",
    openers=r"^(?:(?:ah y|oh y|ah|oh|y|también|además|por cierto|btw|bueno|pues|vale|ok|okay|sí"
    r"|gracias|hola|buenas|buenos días|buenas tardes|oye|eh|para que sepas|ojo|ps|ahora|actualmente|ahora mismo|hoy|últimamente"
    r"|hoy en día|la verdad|en realidad|a propósito|presentación rápida|presentación|corrección"
    r"|perdón|perdona|desde hace poco|me presento|que|q)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:y|pero|aunque|mientras|así que)\s+"
    r"(?=(?:yo|mi|mis|me|soy|vivo|trabajo|tengo|estudio|hablo|nuestro|nuestra|ahora|desde|llevo)\b)"
    r"|,\s+(?!(?:y|pero|o|también|por favor|no)\b)(?=\S)"
    r"|(?<!no)\s+(?=(?:tengo \d{1,3} años|vivo en|trabajo como|me llamo)\b)",
    negation=r"\b(?:no|nunca|jamás|ningun\w*|nada|nadie|tampoco|ni)\b",
    unreal=r"\b(?:si|quisiera|quiero|gustaría|sueño|espero|ojalá|quizás|quizá|tal vez|podría|debería"
    r"|pienso|voy a|algún día|imagina)\b",
    conditional=r"\b(?:si|imagina|imagínate|supongamos|cuando)\b",
    passing=r"\b(?:esta semana|este fin de semana|unos días|de vacaciones|de viaje|de paso"
    r"|por trabajo|temporalmente|por ahora)\b",
    past=r"\b(?:antes|antiguamente|ex|hasta|de pequeñ[oa]|de niñ[oa]|vivía|trabajaba|era|tenía|ya no)\b",
    user_frames=[
        Frame("name", _YO + r"me llamo\s+(?P<v>.+)"),
        Frame("name", r"mi nombre es\s+(?P<v>.+)|nombre\s*:\s*(?P<v2>.+)"),
        Frame("name", r"(?:puedes |podéis )?llamarme\s+(?P<v>.+)|llámame\s+(?P<v2>.+)", template="weak"),
        Frame("name", r"(?:yo\s+)?soy\s+(?P<v>[^\s,]+(?:\s+[^\s,]+)?)$|(?:aquí|acá)\s+(?P<v2>[^\s,]+)$", template="weak", decoy=False),
        Frame("age", _YO + r"tengo\s+(?P<v>\d{1,3})\s+años\b|edad\s*:\s*(?P<v2>\d{1,3})"),
        Frame("age", _YO + r"tengo\s+(?P<v>\d{1,3})(?=$|\s*,|\s+(?:y|pero)\b)"),
        Frame("age", r"(?:acabo de cumplir|cumplí)\s+(?P<v>\d{1,3})\b"),
        Frame("home", _YO + r"(?:vivo|resido)\s+(?:{ADV})?(?:con\s+(?:mi|mis|nuestr[oa]s?)\s+[^,]+?\s+)?(?:en|cerca de|a las afueras de|al lado de|por)\s+(?P<v>.+)"),
        Frame("home", r"(?:me (?:acabo de mudar|mudé|he mudado|vine)|nos (?:mudamos|hemos mudado))\s+a\s+(?P<v>.+)"),
        Frame("home", r"mi casa está\s+en\s+(?P<v>.+)"),
        Frame("home", r"(?:vivimos)\s+(?:en|cerca de)\s+(?P<v>.+)|llevo\s+(?:\S+\s+){0,3}viviendo\s+en\s+(?P<v2>.+)"),
        Frame("home", r"(?:estoy\s+)?(?:viviendo|instalad[oa]|afincad[oa]|radicad[oa]|basad[oa])\s+en\s+(?P<v>.+)|(?:ciudad|residencia)\s*:\s*(?P<v2>.+)"),
        Frame("origin", _YO + r"soy\s+(?:{ADV})?(?:originari[oa]\s+)?de\s+(?P<v>.+)"),
        Frame("origin", _YO + r"vengo\s+de\s+(?P<v>.+)"),
        Frame("origin", r"(?:yo\s+)?(?:soy\s+)?(?:nací|me crié|crecí|criad[oa]|nacid[oa]|oriund[oa] de|oriund[oa])\s+(?:y crecí\s+|y me crié\s+)?en\s+(?P<v>.+)|(?:origen|procedencia)\s*:\s*(?P<v2>.+)"),
        Frame("studies", _YO + r"estudio\s+(?P<v>.+)"),
        Frame("studies", r"(?:estoy\s+)?estudiando\s+(?P<v>.+)|soy estudiante de\s+(?P<v2>.+)"),
        Frame("studies", r"(?:hago|estoy haciendo|curso)\s+(?:un máster|un grado|la carrera|un doctorado|el doctorado|un ciclo)\s+(?:en|de)\s+(?P<v>.+)"),
        Frame("occupation", _YO + r"(?:trabajo|curro)\s+(?:{ADV})?(?:como|de)\s+(?P<v>.+?)(?:\s+(?:en|para)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", r"mi (?:trabajo|profesión|oficio|curro)\s+es\s+(?P<v>.+)|de (?:profesión|oficio),? (?:soy\s+)?(?P<v2>.+)"),
        Frame("occupation", r"(?:en cuanto (?:a|al)\s+|respecto (?:a|al)\s+|de\s+)?(?:trabajo|profesión|oficio|curro)\s*:\s*(?P<v>.+)"),
        Frame("occupation", _YO + r"soy\s+(?:{ADV})?(?:un|una)?\s*(?P<v>.+?)(?:\s+en\s+(?P<org>[a-záéíóúñ].+))?$", decoy=False),
        Frame("occupation", _YO + r"(?:doy clases de|enseño)\s+(?P<v>.+)", template="teach"),
        Frame("employer", _YO + r"(?:trabajo|curro)\s+(?:{ADV})?(?:en|para)\s+(?P<v>.+?)(?:\s+(?:como|de)\s+(?P<job>.+))?$"),
        Frame("languages", _YO + r"hablo\s+(?P<v>.+)|mi lengua materna es\s+(?P<v2>.+)"),
        Frame("answers", r"(?:(?:the|des|les|unas|las|le|die|delle)\s+)?(?:answers|replies|réponses|respuestas|risposte|antworten)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"(?:{STANDING}\s*,?\s+)?(?:(?:puedes|podrías|podéis)\s+)?(?:por favor\s+)?(?:siempre\s+)?(?:explícame|explícamelo|respóndeme|responde|contéstame|contesta|responder|contestar|responderme|contestarme|escríbeme|escribe|escribir|dame respuestas)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"prefiero\s+(?P<v>(?:las\s+|unas\s+)?respuestas\b.*)", template="whole"),
        Frame("answers", r"(?:por favor\s+)?(?:nada de|sin)\s+(?P<v>.+?)\s+en (?:tus|sus|las) respuestas\b.*", template="without"),
        Frame("dislikes", _YO + r"(?:odio|detesto|no soporto|no aguanto)\s+(?P<v>.+)"),
        Frame("dislikes", r"(?:a mí\s+)?no me gusta(?:n)?\s+(?:nada\s+)?(?P<v>.+)"),
        Frame("likes", r"(?:a mí\s+)?me\s+(?:gusta(?:n)?|encanta(?:n)?|apasiona(?:n)?|flipa(?:n)?)\s+(?:mucho\s+)?(?P<v>.+)"),
        Frame("likes", _YO + r"(?:adoro|amo|prefiero)\s+(?P<v>.+)"),
        Frame("likes", r"(?:soy\s+)?(?:muy\s+)?(?:fan|aficionad[oa]|amante|fanátic[oa])\s+(?:de(?:l)?|a(?:l)?)\s+(?P<v>.+)"),
        Frame("likes", r"mi \w+ favorit[oa] es\s+(?P<v>.+)|(?:aficiones|hobbies|pasatiempos)\s*:\s*(?P<v2>.+)"),
        Frame("likes", r"(?:yo\s+)?(?:toco|practico|juego al|juego a la)\s+(?:el |la |los |las )?(?P<v>.+)"),
        Frame("origin", _YO + r"soy\s+(?:{ADV})?(?:de origen\s+)?(?P<v>\S+)$|de origen\s+(?P<v2>\S+)$", template="demonym", decoy=False),
        Frame("likes", r"(?:estoy aprendiendo|aprendo)\s+(?P<v>.+)|(?:empecé|he empezado)\s+a\s+(?P<v2>.+)", decoy=False),
        Frame("diet", _YO + r"soy\s+(?:{ADV})?(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"(?:ya\s+)?no\s+(?:como|tomo|bebo)(?:\s+nada de)?\s+(?P<v>.+)|(?:dejé|he dejado) de (?:comer|tomar|beber)\s+(?P<v2>.+)"),
        Frame("diet", r"(?:nunca|jamás)\s+(?:como|bebo|tomo)\s+(?P<v>.+)"),
        Frame("diet", r"no puedo (?:comer|tomar)\s+(?P<v>.+)|evito\s+(?P<v2>.+)"),
        Frame("health", _YO + r"(?:soy\s+)?(?:{ADV})?(?:muy\s+)?(?:alérgic[oa]|intolerante)\s+a(?:l)?\s+(?:la\s+|los\s+|las\s+)?(?P<v>.+)"),
        Frame("health", _YO + r"(?:tengo|sufro de)\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("health", _YO + r"soy\s+(?P<v>" + _DIAGNOSED + r")\b.*|estoy\s+(?P<v2>embarazada)\b.*", template="is"),
        Frame("age", r"(?P<v>\d{2})(?:\s+años)?$", fragment=True, decoy=False),
        Frame("occupation", r"(?:un|una)?\s*(?P<v>[^\d,]+?)$", fragment=True, decoy=False),
        Frame("employer", r"(?:en|para)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("origin", r"de\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("name", r"(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+)?)$", template="here", fragment=True, decoy=False),
    ],
    other_frames=[
        Frame("relative_name", r"\s+(?:se llama|se llaman|son)\s+(?P<v>.+)"),
        Frame("age", r"\s+tiene\s+(?P<v>\d{1,3})\s+años|\s+de\s+(?P<v2>\d{1,3})\s+años"),
        Frame("home", r"\s+vive\s+en\s+(?P<v>.+)"),
        Frame("origin", r"\s+(?:es|viene)\s+de\s+(?P<v>.+)"),
        Frame("occupation", r"\s+trabaja (?:como|de)\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r"\s+es\s+(?:un\s+|una\s+)?(?P<v>.+)"),
        Frame("employer", r"\s+trabaja\s+(?:en|para)\s+(?P<v>.+)"),
        Frame("studies", r"\s+estudia\s+(?P<v>.+)"),
        Frame("languages", r"\s+habla\s+(?P<v>.+)"),
        Frame("health", r"\s+es\s+(?:muy\s+)?(?:alérgic[oa]|intolerante)\s+a(?:l)?\s+(?:la\s+|los\s+|las\s+)?(?P<v>.+)"),
        Frame("health", r"\s+tiene\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("diet", r"\s+no\s+puede\s+(?:comer|tomar|beber)\s+(?P<v>.+)|\s+no\s+come\s+(?P<v2>.+)"),
        Frame("diet", r"\s+es\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("health", r"\s+es\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("dislikes", r"\s+(?:odia|detesta)\s+(?P<v>.+)"),
        Frame("likes", r"\s+(?:adora|ama|toca el|toca la|juega al)\s+(?P<v>.+)"),
    ],
    possessive=r"(?:mi|mis|nuestro|nuestra|nuestros|nuestras)",
    relations=_RELATIVES,
    having=r"(?:yo\s+)?(?:tengo|tenemos)",
    numbers=r"(?:un|una|dos|tres|cuatro|cinco|\d)",
    counted=r"(?:dos|tres|cuatro|cinco|[2-9])",
    naming=r"(?:que se llama|que se llaman|llamad[oa]s?)",
    with_words="con|junto a",
    value_ends=r"\s*[,;:!?()]|(?<!\bst)(?<!\bdr)\.|\s+(?:lol|haha|ahah|jaja|jeje|xd|mdr|ptdr)\b|\s+(?:y|pero|o|porque|aunque|así que|mientras|que|cuando|si|con"
    r"|desde|ahora|también|no)\b",
    vague=word_set("""eso esto esa ese esta este ello lo te ti tu tú vosotros vuestro tus
        cómo cuándo qué quién todo nada algo"""),
    place_leads=word_set("""un una pequeño pequeña pueblo pueblito ciudad cerca de del las
        afueras centro norte sur este oeste zona provincia campo barrio en al lado"""),
    articles=word_set("el la los las un una unos unas"),
    indefinite=word_set("un una unos unas"),
    preps=word_set("en de del para con por a al como desde"),
    standing=r"\b(?:a partir de ahora|de ahora en adelante|desde ahora|en adelante|siempre|en el futuro|por defecto|cada vez)\b",
    tomorrow=r"\bmañana\b",
    today=r"\b(?:hoy|esta noche|esta mañana|esta tarde)\b",
    correction=r"^(?:(?:perdón|perdona|no|corrección|quería decir|en realidad)[,:!\s]+)*(?:es\s+)?(?P<new>[^,]+?),?\s+no\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:yo|mi|mis|me|soy|vivo|trabajo|tengo|estudio|hablo|nuestro|nuestra)\b",
    reported=r"\b(?:dice|dicen|dijo|me dijo|piensa|cree|según)\b",
    user_words=word_set("yo me mí mi mis nosotros nos nuestro nuestra"),
    diets=_DIETS,
    takes_back=r"(?:^|[.,;!?]\s*)(?:espera,?\s+no|no,?\s+espera|perdón,?\s+quiero decir|quiero decir|quise decir|mejor dicho|bueno,?\s+en realidad|corrección)(?!\w)[\s,:!]*",
    no_longer=r"(?:^|[,;.!?\-–—]\s*)(?:(?:bueno|o sea|mejor dicho|al menos),?\s+)?(?:lo\s+)?era(?=\s*(?:[,;.!?)]|$))|\b(?:ya no|ya no lo soy)(?=\s*(?:[,;.!?)]|$))|(?:^|[,;.!?\-–—]\s*|\b(?:y|pero|ahora)\s+)(?:(?:ya\s+)?(?:estoy|soy)\s+(?:ya\s+)?)?(?:jubilad[oa]|retirad[oa])\b",
    asked_back=r"[,;]\s*¿?(?:y|qué|que|dónde|donde|cómo|como|quién|cuál|cuándo|por qué|de dónde)\b[^,;]{0,40}?(?<!\w)(?:tú|tu|tus|usted|ustedes|te|ti|vos)(?!\w)[^,;]*\?\s*$",
    every_answer=r"\b(?:respuestas|mensajes)\b",
    about_the_user=r"(?:,|\s+y|\s+pero)\s+(?:\S+\s+){0,2}(?:me|yo|nos|conmigo)\b",
    closers=r"(?:\s*(?:\b(?:jaja\w*|jeje\w*|jiji|lol|xd)\b|:\)|;\)|!+|[\U0001F300-\U0001FAFF\u2600-\u27BF]+))+\s*$",
    normal=((r"\bq\b", "que"), (r"\bxq\b", "porque")),
    macros={
        "ADV": r"(?:(?:ahora|actualmente|también|ya|todavía|aún|realmente|desde hace poco"
        r"|oficialmente|por fin)\s+)+",
    },
)
# fmt: on
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
