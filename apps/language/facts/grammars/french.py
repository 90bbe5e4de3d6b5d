"""French: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

# fmt: off
_RELATIVES = {
    "fille": Relation("daughter", "la"), "fils": Relation("son", "le"),
    "enfants": Relation("child", "les"), "enfant": Relation("child", "l'"),
    "femme": Relation("wife", "la"), "mari": Relation("husband", "le"),
    "compagnon": Relation("partner", "le"), "compagne": Relation("partner", "la"),
    "conjoint": Relation("partner", "le"), "conjointe": Relation("partner", "la"),
    "copain": Relation("boyfriend", "le"), "copine": Relation("girlfriend", "la"),
    "mère": Relation("mother", "la"), "maman": Relation("mother", "la"),
    "père": Relation("father", "le"), "papa": Relation("father", "le"),
    "sœur": Relation("sister", "la"), "soeur": Relation("sister", "la"),
    "frère": Relation("brother", "le"), "grand-mère": Relation("grandmother", "la"),
    "grand-père": Relation("grandfather", "le"), "tante": Relation("aunt", "la"),
    "oncle": Relation("uncle", "l'"), "cousin": Relation("cousin", "le"),
    "cousine": Relation("cousin", "la"), "neveu": Relation("nephew", "le"),
    "nièce": Relation("niece", "la"), "ami": Relation("friend", "l'"),
    "amie": Relation("friend", "l'"), "meilleur ami": Relation("friend", "le"),
    "meilleure amie": Relation("friend", "la"), "patron": Relation("boss", "le"),
    "patronne": Relation("boss", "la"), "chef": Relation("boss", "le"),
    "collègue": Relation("colleague", "le"), "coloc": Relation("roommate", "le"),
    "chien": Relation("dog", "le", pet=True), "chienne": Relation("dog", "la", pet=True),
    "chat": Relation("cat", "le", pet=True), "chatte": Relation("cat", "la", pet=True),
    "chats": Relation("cat", "les", pet=True), "chiens": Relation("dog", "les", pet=True),
    "chiot": Relation("dog", "le", pet=True), "chaton": Relation("cat", "le", pet=True),
    "lapin": Relation("rabbit", "le", pet=True), "hamster": Relation("hamster", "le", pet=True),
    "cheval": Relation("horse", "le", pet=True), "cochon d'inde": Relation("guinea pig", "le", pet=True),
    "belle-mère": Relation("mother-in-law", "la"), "beau-père": Relation("father-in-law", "le"),
    "petite-fille": Relation("granddaughter", "la"), "petit-fils": Relation("grandson", "le"), "perroquet": Relation("parrot", "le", pet=True),
}
_JE = r"(?:moi,?\s+)?(?:{ADV})?"
_TO = r"(?:(?:aux|au|à la|à|a)\s+|à l')"
_DIETS = r"végétarien(?:ne)?|végétalien(?:ne)?|végane?|vegan|vegane|pescétarien(?:ne)?|flexitarien(?:ne)?"
_CONDITIONS = (r"(?:du\s+|le\s+|de l'|la\s+|l')?(?:alzheimer|parkinson|démence|diabète(?: de type [12])?|asthme|épilepsie|migraines|"
               r"(?:une\s+)?allergie\s+\S+(?:\s+\S+)?|(?:une\s+)?intolérance\s+\S+(?:\s+\S+)?)")
_DIAGNOSED = r"cœliaque|coeliaque|diabétique|asthmatique|intolérante? au \w+|enceinte|épileptique|sourde?|aveugle|daltonien(?:ne)?"

GRAMMAR = Grammar(
    code="fr",
    openers=r"^(?:(?:ah et|oh et|ah|oh|et|aussi|d'ailleurs|au fait|btw|bref|bon|alors|donc|ok|okay"
    r"|oui|merci|salut|bonjour|bonsoir|coucou|eh|hé|tiens|pour info|pour ton info|pour la petite"
    r" histoire|sinon|maintenant|actuellement|en ce moment|aujourd'hui|ces temps-ci|ces jours-ci"
    r"|dernièrement|en fait|franchement|petite précision|précision|ps|à propos|rapide présentation"
    r"|présentation|correction|pardon|désolée?|depuis peu|je me présente)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:et|mais|donc|alors que|tandis que)\s+"
    r"(?=(?:je|j'|moi|mon|ma|mes|nous|notre|nos|on|depuis|maintenant)\b)|,\s+(?!(?:et|mais|ou|aussi"
    r"|s'il te plaît|stp|pas)\b)(?=\S)"
    r"|(?<!ne)(?<!pas)\s+(?=(?:j'ai \d{1,3} ans|j'habite|je travaille comme|je m'appelle)\b)",
    negation=r"\b(?:ne|pas|jamais|aucun\w*|rien|personne|ni)\b|\bn'",
    unreal=r"\b(?:si|s'il|j'aimerais|aimerais|voudrais|rêve|rêverais|j'espère|espère|peut-être"
    r"|pourrais|devrais|veux|compte|un jour|vais|envie de|imagine)\b",
    conditional=r"\b(?:si|s'il|imagine|imaginons|supposons|quand|lorsque)\b",
    passing=r"\b(?:cette semaine|ce week-end|ce weekend|pour quelques jours|pour le week-end"
    r"|en vacances|en voyage|en déplacement|de passage|temporairement|pour l'instant)\b",
    past=r"\b(?:avant|autrefois|auparavant|ancien|ancienne|ex|habitais|vivais|travaillais|étais"
    r"|avais|jusqu'à|jusqu'en|plus)\b",
    user_frames=[
        Frame("name", r"je m'appelle\s+(?P<v>.+)"),
        Frame("name", r"mon (?:nom|prénom)(?:,)?\s+(?:est|c'est)\s+(?P<v>.+)|(?:prénom|nom)\s*:\s*(?P<v2>.+)"),
        Frame("name", r"moi,?\s+c'est\s+(?P<v>.+)"),
        Frame("name", r"(?:tu peux |vous pouvez )?m'appeler\s+(?P<v>.+)|appelle-moi\s+(?P<v2>.+)", template="weak"),
        Frame("name", r"je suis\s+(?P<v>[^\s,]+(?:\s+[^\s,]+)?)$", template="weak", decoy=False),
        Frame("name", r"(?:c'est\s+)?(?P<v>[^\s,]+)\s+ici$", template="here", decoy=False),
        Frame("age", r"j'ai\s+(?P<v>\d{1,3})\s+ans\b|âge\s*:\s*(?P<v2>\d{1,3})"),
        Frame("age", r"je viens d'avoir\s+(?P<v>\d{1,3})\s+ans|j'ai eu\s+(?P<v2>\d{1,3})\s+ans"),
        Frame("home", r"j'habite\s+(?:{ADV})?(?:à|a|en|au|aux|dans|près de|à côté de|sur|vers)\s+(?P<v>.+)"),
        Frame("home", r"j'habite\s+(?P<v>[A-Za-zÀ-ÿ].+)"),
        Frame("home", r"(?:nous habitons|on habite|nous vivons|on vit)\s+(?:à|a|en|au|aux|dans|près de)\s+(?P<v>.+)"),
        Frame("home", r"(?:je\s+(?:{ADV})?(?:vis|réside|demeure)|j'habite)\s+(?:{ADV})?(?:avec\s+(?:mon|ma|mes|notre|nos)\s+[^,]+?\s+)?(?:à|a|en|au|aux|dans|près de)\s+(?P<v>.+)"),
        Frame("home", r"(?:je\s+)?(?:viens de m'installer|me suis installée?|suis installée?|viens de déménager|ai déménagé|suis basée?)\s+(?:à|a|en|au|dans|sur)\s+(?P<v>.+)"),
        Frame("home", r"(?:installée?|basée?)\s+(?:à|a|en|au)\s+(?P<v>.+)|(?:ville|domicile)\s*:\s*(?P<v2>.+)"),
        Frame("origin", r"je\s+(?:{ADV})?viens\s+(?:{ADV})?(?:de|d'|du|des)\s*(?P<v>.+)"),
        Frame("origin", r"je suis\s+(?:{ADV})?(?:originaire\s+)?(?:de|d')\s*(?P<v>.+)"),
        Frame("origin", r"(?:je suis\s+)?(?:née?|née? et (?:élevée?|grandie?))\s+(?:à|a|en|au)\s+(?P<v>.+)|j'ai grandi\s+(?:à|a|en|au|dans)\s+(?P<v2>.+)"),
        Frame("origin", r"originaire (?:de|d')\s*(?P<v>.+)|origine\s*:\s*(?P<v2>.+)"),
        Frame("studies", r"j'étudie\s+(?:la |le |les |l')?(?P<v>.+)"),
        Frame("studies", r"(?:je suis\s+)?(?:en fac|à la fac|en licence|en master|en prépa|étudiante?|doctorante?)\s+(?:de|d'|en)\s*(?P<v>.+)"),
        Frame("studies", r"je fais (?:des études|mes études)\s+(?:de|d'|en)\s*(?P<v>.+)"),
        Frame("studies", r"je suis (?:en\s+\S+\s+année\s+)?(?:étudiante?|en licence|en master|en thèse|en doctorat)\s+(?:en|de|d')\s*(?P<v>.+)"),
        Frame("studies", r"(?:je fais|je prépare)\s+(?:un master|une licence|un doctorat|une thèse|un bts|un dut)\s+(?:en|de|d'|sur)\s*(?P<v>.+)"),
        Frame("occupation", r"je\s+(?:{ADV})?(?:travaille|bosse)\s+comme\s+(?P<v>.+?)(?:\s+(?:chez|pour|à)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", r"(?:mon métier|ma profession|mon boulot|mon travail|mon job)(?:,)?\s+(?:c'est|est)\s+(?P<v>.+)|de métier,? je suis\s+(?P<v2>.+)"),
        Frame("occupation", r"(?:côté |niveau |question )?(?:métier|profession|boulot|travail|job|taf)\s*:\s*(?P<v>.+)"),
        Frame("occupation", r"je suis\s+(?:{ADV})?(?:un |une )?(?P<v>.+?)(?:\s+(?:chez|à l'|au|à la)\s+(?P<org>.+))?$", decoy=False),
        Frame("occupation", r"j'enseigne\s+(?:la |le |les |l')?(?P<v>.+)", template="teach"),
        Frame("employer", r"(?:je\s+)?(?:{ADV})?(?:travaille|bosse|bosses)\s+(?:{ADV})?(?:chez|pour|à la|au|à l'|aux)\s*(?P<v>.+?)(?:\s+comme\s+(?P<job>.+))?$"),
        # Where, then the job: "je travaille à Paris comme infirmière", "… de chez moi comme …".
        Frame("occupation", r"(?:je\s+)?(?:{ADV})?(?:travaille|bosse)\s+(?:{ADV})?(?:à|en|dans|de chez|depuis)\s+\S.*?\s+comme\s+(?P<v>.+)$", explicit=True),
        Frame("languages", r"je\s+(?:{ADV})?parle\s+(?P<v>.+)"),
        Frame("languages", r"ma langue maternelle est\s+(?P<v>.+)"),
        Frame("answers", r"(?:{STANDING}\s*,?\s+)?(?:(?:peux-tu|pouvez-vous|tu peux|vous pouvez|pourrais-tu|pourriez-vous)\s+)?(?:s'il te plaît\s+|stp\s+|merci de\s+)?(?:toujours\s+)?(?:me\s+)?(?:explique-moi|expliquez-moi|réponds-moi|répondez-moi|écris-moi|écrivez-moi|réponds|répondez|répondre|écris|écrivez|écrire|donne-moi des réponses|fais des réponses)\s+(?:moi\s+)?(?P<v>.+)", template="request"),
        Frame("answers", r"(?:(?:the|des|les|unas|las|le|die|delle)\s+)?(?:answers|replies|réponses|respuestas|risposte|antworten)\s+(?P<v>.+)", template="request"),

        Frame("answers", r"je préfère\s+(?P<v>(?:les\s+|des\s+)?réponses\b.*)", template="whole"),
        Frame("answers", r"(?:s'il te plaît\s+)?pas d'(?P<v>.+?)\s+dans (?:tes|vos) réponses\b.*", template="without"),
        Frame("dislikes", r"je\s+(?:{ADV})?(?:déteste|n'aime pas|n'aime vraiment pas|n'aime pas du tout|ne supporte pas|ai horreur (?:de|du|des|d'))\s*(?:le |la |les |l')?(?P<v>.+)"),
        Frame("likes", r"j'(?:aime|adore)\s+(?:bien\s+|beaucoup\s+|vraiment\s+|trop\s+)?(?:le |la |les |l')?(?P<v>.+)"),
        Frame("likes", r"je\s+(?:{ADV})?préfère\s+(?P<v>.+)"),
        Frame("likes", r"(?:je suis\s+)?(?:{ADV})?(?:un grand |une grande |grande? )?(?:fan|passionnée?|fou|folle|dingue|accro|supporter|supportrice)(?:\s+absolue?|\s+inconditionnelle?)?\s+(?:de|d'|du|des|à|au)\s*(?P<v>.+)"),
        Frame("likes", r"mon \w+ préféré(?:,)?\s+(?:c'est|est)\s+(?P<v>.+)|ma \w+ préférée(?:,)?\s+(?:c'est|est)\s+(?P<v2>.+)"),
        Frame("likes", r"(?:loisirs|passions|hobbies|centres d'intérêt)\s*:\s*(?P<v>.+)"),
        Frame("likes", r"j'apprends\s+(?P<v>.+)|j'ai commencé\s+(?:à|a)\s+(?P<v2>.+)", decoy=False),
        Frame("likes", r"(?:je\s+)?(?:fais|pratique|joue)\s+(?:du|de la|de l'|des|au|à la)\s+(?P<v>.+)"),
        Frame("likes", r"(?:côté|niveau|question)\s+\w+\s*:\s*(?P<v>.+)", decoy=False),
        Frame("origin", r"je suis\s+(?:{ADV})?(?:d'origine\s+)?(?P<v>\S+)$|(?:d'origine)\s+(?P<v2>\S+)$", template="demonym", decoy=False),
        Frame("diet", r"je suis\s+(?:{ADV})?(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"(?:je\s+)?mange\s+(?:{ADV})?(?P<v>halal|casher|kasher|" + _DIETS + r")\b.*"),
        Frame("diet", r"je\s+(?:ne\s+)?(?:mange|bois)\s+(?:plus|pas|jamais)\s+(?:de\s+|d'|du\s+)?(?P<v>.+)"),
        Frame("diet", r"j'ai arrêté\s+(?:de manger\s+|de boire\s+)?(?:la |le |les |l')?(?P<v>.+)|j'évite\s+(?P<v2>.+)"),
        Frame("diet", r"je ne (?:peux|dois) pas (?:manger|boire)\s+(?:de\s+|d'|du\s+)?(?P<v>.+)"),
        Frame("health", r"(?:je suis\s+)?(?:{ADV})?(?:très\s+|gravement\s+)?(?:allergique|intolérante?)\s+" + _TO + r"(?P<v>.+)"),
        Frame("health", r"j'ai\s+(?P<v>" + _CONDITIONS + r")\b.*|je souffre d(?:e |')(?P<v2>.+)", template="has"),
        Frame("health", r"je suis\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("diet", r"(?:je\s+)?ne\s+(?:supporte|tolère|digère)\s+pas\s+(?:le |la |les |l')?(?P<v>.+)"),
        Frame("age", r"(?P<v>\d{2})(?:\s+ans)?$", fragment=True, decoy=False),
        Frame("occupation", r"(?:un|une)?\s*(?P<v>[^\d,]+?)$", fragment=True, decoy=False),
        Frame("employer", r"(?:chez)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("origin", r"(?:de|d')\s*(?P<v>.+)$", fragment=True, decoy=False),
        Frame("name", r"(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+)?)$", template="here", fragment=True, decoy=False),
    ],
    other_frames=[
        Frame("relative_name", r"\s+(?:s'appelle|s'appellent|se nomme|sont)\s+(?P<v>.+)"),
        Frame("age", r"\s+a\s+(?P<v>\d{1,3})\s+ans|\s+de\s+(?P<v2>\d{1,3})\s+ans"),
        Frame("home", r"\s+(?:habite|vit)\s+(?:à|a|en|au|aux|dans)\s+(?P<v>.+)"),
        Frame("origin", r"\s+(?:vient|est originaire)\s+(?:de|d'|du)\s*(?P<v>.+)"),
        Frame("occupation", r"\s+travaille comme\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r"\s+est\s+(?:un |une )?(?P<v>.+)"),
        Frame("employer", r"\s+travaille\s+(?:chez|pour)\s+(?P<v>.+)"),
        Frame("studies", r"\s+étudie\s+(?P<v>.+)"),
        Frame("languages", r"\s+parle\s+(?P<v>.+)"),
        Frame("health", r"\s+est\s+(?:très\s+)?(?:allergique|intolérante?)\s+" + _TO + r"(?P<v>.+)"),
        Frame("health", r"\s+a\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("diet", r"\s+ne\s+(?:peut|doit)\s+pas\s+(?:manger|boire|avoir)\s+(?:de\s+|d'|du\s+)?(?P<v>.+)"),
        Frame("diet", r"\s+ne\s+mange\s+(?:pas|plus|jamais)\s+(?:de\s+|d'|du\s+)?(?P<v>.+)"),
        Frame("diet", r"\s+est\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"\s+ne\s+(?:supporte|tolère|digère)\s+pas\s+(?:le |la |les |l')?(?P<v>.+)"),
        Frame("health", r"\s+est\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("dislikes", r"\s+(?:déteste|n'aime pas)\s+(?P<v>.+)"),
        Frame("likes", r"\s+(?:adore|aime|joue du|joue de la|joue au)\s+(?P<v>.+)"),
    ],
    possessive=r"(?:ma|mon|mes|notre|nos)",
    relations=_RELATIVES,
    having=r"(?:j'ai|nous avons|on a)",
    numbers=r"(?:un|une|deux|trois|quatre|cinq|\d)",
    counted=r"(?:deux|trois|quatre|cinq|[2-9])",
    naming=r"(?:qui s'appelle|qui s'appellent|nommée?s?|appelée?s?)",
    with_words="avec",
    value_ends=r"\s*[,;:!?()]|(?<!\bst)(?<!\bdr)\.|\s+(?:lol|haha|ahah|jaja|jeje|xd|mdr|ptdr)\b|\s+(?:et|mais|ou|parce que|car|donc|puisque|pendant|qui|que|quand"
    r"|si|avec|depuis|maintenant|aussi|pas)\b",
    vague=word_set("""ça ca cela ceci ce cette ces celui celle ceux tu te toi vous votre vos ton ta
        tes comment quand quoi qui tout rien quelque chose moi-même"""),
    place_leads=word_set("""un une petit petite village ville bourg près de d' du la le les
        banlieue périphérie centre nord sud est ouest région campagne à côté environs
        proche coin quartier dans en"""),
    articles=word_set("le la les l' un une des du de"),
    indefinite=word_set("un une des"),
    preps=word_set("à a au aux en de d' du des chez pour dans sur avec comme"),
    standing=r"\b(?:désormais|dorénavant|à partir de maintenant|à l'avenir|toujours|par défaut|chaque fois|à chaque fois)\b",
    tomorrow=r"\bdemain\b",
    today=r"\b(?:aujourd'hui|ce soir|ce matin|cet après-midi)\b",
    correction=r"^(?:(?:en fait|pardon|non|correction|je voulais dire)[,:!\s]+)*(?:c'est\s+)?(?P<new>[^,]+?),?\s+pas\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:je|j'|moi|mon|ma|mes|nous|notre|nos)\b",
    reported=r"\b(?:dit|disent|a dit|m'a dit|pense|pensent|selon|d'après)\b",
    user_words=word_set("je j' moi me m' mon ma mes nous notre nos"),
    diets=_DIETS,
    takes_back=r"(?:^|[.,;!?]\s*)(?:enfin non|non attends|attends,?\s+non|pardon,?\s+je veux dire|je veux dire|je voulais dire|ou plutôt|en fait non|non en fait|correction)\b[\s,:!]*",
    no_longer=r"(?:^|[,;.!?\-–—]\s*)(?:(?:enfin|ou plutôt|du moins|bon),?\s+)?(?:j'étais|je l'étais)(?=\s*(?:[,;.!?)]|$))|\b(?:plus maintenant|je ne le suis plus|ce n'est plus le cas)(?=\s*(?:[,;.!?)]|$))|(?:^|[,;.!?\-–—]\s*|\b(?:et|mais|maintenant)\s+)(?:je suis\s+)?(?:à la retraite|retraité(?:e)?)\b",
    asked_back=r"[,;]\s*¿?(?:et|qu'est-ce|que|quel|quelle|quels|où|comment|qui|pourquoi|quand)\b[^,;]{0,40}?(?<!\w)(?:toi|tu|t'\w+|vous|ton|ta|tes|votre|vos)(?!\w)[^,;]*\?\s*$",
    every_answer=r"\b(?:réponses|messages)\b",
    about_the_user=r"(?:,|\s+et|\s+mais)\s+(?:\S+\s+){0,2}(?:me|m'|moi|je|j'|nous)",
    closers=r"(?:\s*(?:\b(?:mdr|ptdr|lol|haha\w*|hihi|xd)\b|:\)|;\)|!+|[\U0001F300-\U0001FAFF\u2600-\u27BF]+))+\s*$",
    normal=((r"\bj'\s+", "j'"), (r"\bje\s+ai\b", "j'ai"), (r"\bj(?=habite|ai\b|adore|aime|étudie)", "j'"),
            (r"\b(?:jsuis|chuis|j'suis)\b", "je suis"), (r"\bjbosse\b", "je bosse")),
    macros={
        "ADV": r"(?:(?:maintenant|actuellement|aussi|déjà|encore|vraiment|toujours|depuis peu"
        r"|officiellement|enfin)\s+)+",
    },
)
# fmt: on
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
