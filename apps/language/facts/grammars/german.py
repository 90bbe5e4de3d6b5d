"""German: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

# fmt: off
_RELATIVES = {
    "tochter": Relation("daughter", "die"), "sohn": Relation("son", "der"),
    "kinder": Relation("child", "die"), "kind": Relation("child", "das"),
    "töchter": Relation("daughter", "die"), "söhne": Relation("son", "die"),
    "frau": Relation("wife", "die"), "ehefrau": Relation("wife", "die"),
    "mann": Relation("husband", "der"), "ehemann": Relation("husband", "der"),
    "partner": Relation("partner", "der"), "partnerin": Relation("partner", "die"),
    "freund": Relation("boyfriend", "der"), "freundin": Relation("girlfriend", "die"),
    "mutter": Relation("mother", "die"), "mama": Relation("mother", "die"),
    "vater": Relation("father", "der"), "papa": Relation("father", "der"),
    "schwester": Relation("sister", "die"), "bruder": Relation("brother", "der"),
    "oma": Relation("grandmother", "die"), "opa": Relation("grandfather", "der"),
    "großmutter": Relation("grandmother", "die"), "großvater": Relation("grandfather", "der"),
    "tante": Relation("aunt", "die"), "onkel": Relation("uncle", "der"),
    "cousin": Relation("cousin", "der"), "cousine": Relation("cousin", "die"),
    "neffe": Relation("nephew", "der"), "nichte": Relation("niece", "die"),
    "beste freundin": Relation("friend", "die"), "bester freund": Relation("friend", "der"),
    "chef": Relation("boss", "der"), "chefin": Relation("boss", "die"),
    "kollege": Relation("colleague", "der"), "kollegin": Relation("colleague", "die"),
    "mitbewohner": Relation("roommate", "der"), "mitbewohnerin": Relation("roommate", "die"),
    "hund": Relation("dog", "der", pet=True), "hündin": Relation("dog", "die", pet=True),
    "hunde": Relation("dog", "die", pet=True), "katze": Relation("cat", "die", pet=True),
    "katzen": Relation("cat", "die", pet=True), "kater": Relation("cat", "der", pet=True),
    "welpe": Relation("dog", "der", pet=True), "kätzchen": Relation("cat", "das", pet=True),
    "kaninchen": Relation("rabbit", "das", pet=True), "hamster": Relation("hamster", "der", pet=True),
    "pferd": Relation("horse", "das", pet=True), "meerschweinchen": Relation("guinea pig", "das", pet=True),
    "schwiegermutter": Relation("mother-in-law", "die"), "schwiegervater": Relation("father-in-law", "der"),
    "enkelin": Relation("granddaughter", "die"), "enkel": Relation("grandson", "der"), "hase": Relation("rabbit", "der", pet=True), "papagei": Relation("parrot", "der", pet=True),
}
_ICH = r"(?:ich\s+)?(?:{ADV})?"  # a clause after "und" drops it: "… und wohne in Leipzig"
# Verb second: "Seit 2019 wohne ich in Berlin", "Beruflich bin ich Lehrerin".
_FRONTED = r"(?:[^\s,]+\s+){0,3}"
_DIETS = r"vegetarier(?:in)?|veganer(?:in)?|vegan|vegetarisch|pescetarier(?:in)?"
_CONDITIONS = r"(?:eine\s+)?(?:alzheimer|parkinson|demenz|\w*allergie|\w*unverträglichkeit|\w*intoleranz|diabetes(?: typ [12])?|asthma|zöliakie|epilepsie|migräne)"
_DIAGNOSED = r"diabetiker(?:in)?|laktoseintolerant|glutenintolerant|schwanger|asthmatiker(?:in)?|epileptiker(?:in)?|zöliakiekrank"

GRAMMAR = Grammar(
    code="de",
    openers=r"^(?:(?:ach und|ach ja|ach übrigens|ach|oh|und|übrigens|btw|also|ok|okay|ja|danke"
    r"|hallo|hi|hey|na|nebenbei|kurz zur info|zur info|fyi|ps|jetzt|momentan|derzeit|zurzeit|aktuell"
    r"|inzwischen|mittlerweile|heute|ehrlich gesagt|eigentlich|apropos|kurz zu mir|zu mir"
    r"|kurze vorstellung|moin moin|moin|servus|grüß gott|grüezi|guten tag|guten morgen|guten abend|korrektur|sorry|seit kurzem|ich stelle mich kurz vor|ich stelle mich vor)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:und|aber|doch|sondern|während)\s+"
    r"(?=(?:ich|mein|meine|meinen|meiner|wir|unser|unsere|seit|jetzt|wohne|arbeite|bin|komme|schon)\b)"
    r"|,\s+(?!(?:und|aber|oder|bitte|nicht)\b)(?=\S)"
    r"|(?<!nicht)\s+(?=(?:ich bin \d{1,3}|ich wohne|ich arbeite als|ich heiße)\b)",
    negation=r"\b(?:nicht|kein\w*|nie|niemals|nichts|nirgends|weder)\b",
    unreal=r"\b(?:wenn|falls|möchte|möchten|würde|würden|hätte|wäre|will|wollen|plane|träume|hoffe"
    r"|vielleicht|könnte|sollte|eines tages|irgendwann)\b",
    conditional=r"\b(?:wenn|falls|angenommen|stell dir vor|sobald)\b",
    passing=r"\b(?:diese woche|dieses wochenende|übers wochenende|für ein paar tage|im urlaub"
    r"|auf reisen|zu besuch|geschäftlich|vorübergehend)\b",
    past=r"\b(?:früher|damals|ehemals|ehemalige\w*|bis|vorher|einst|mehr)\b",
    user_frames=[
        Frame("name", r"(?:ich\s+)?(?:heiße|heisse)\s+(?P<v>.+)|(?:[^\s,]+\s+)?(?:heiße|heisse) ich\s+(?P<v2>.+)"),
        Frame("name", r"meine? name ist\s+(?P<v>.+)|name\s*:\s*(?P<v2>.+)"),
        Frame("name", r"(?:du kannst mich|sie können mich|nenn mich|nennt mich)\s+(?P<v>.+?)(?:\s+nennen)?$", template="weak"),
        Frame("name", r"(?:ich\s+)?bin (?:der|die)\s+(?P<v>[^\s,]+)$", template="weak"),
        Frame("name", r"ich bin\s*(?P<v>[^\s,]+)$|hier ist\s+(?P<v2>[^\s,]+)$", template="weak", decoy=False),
        Frame("name", r"(?P<v>\S+) hier$", template="here", decoy=False),
        Frame("age", _ICH + r"bin\s+(?:{ADV})?(?P<v>\d{1,3})(?:\s+jahre(?:\s+alt)?)?(?=$|\s*,|\s+(?:und|aber)\b)|bin ich\s+(?P<v3>\d{1,3})(?:\s+jahre(?:\s+alt)?)?$|alter\s*:\s*(?P<v2>\d{1,3})"),
        Frame("age", r"ich bin (?:gerade |vor kurzem )?(?P<v>\d{1,3}) geworden|ich bin\s+(?P<v2>\d{1,3})\s+jahre"),
        Frame("home", r"(?:" + _ICH + r"(?:wohne?|lebe)|wir\s+(?:wohnen|leben))\s+(?:{ADV})?(?:seit\s+\S+(?:\s+jahren)?\s+)?(?:mit\s+(?:meine[mnr]?|unsere[mnr]?)\s+[^,]+?\s+)?(?:in|im|bei|nahe|in der nähe von|am rand von|außerhalb von)\s+(?P<v>.+)"),
        Frame("home", r"(?:schon lange\s+|seit \S+(?:\s+jahren)?\s+)?in\s+(?P<v>.+?)\s+(?:zuhause|zu hause|daheim)\b"),
        Frame("home", _FRONTED + r"(?:wohne|lebe) ich\s+(?:{ADV})?(?:in|im|bei|nahe)\s+(?P<v>.+)"),
        Frame("home", r"(?:ich\s+)?bin\s+(?:{ADV})?(?:vor kurzem\s+|gerade\s+)?nach\s+(?P<v>.+?)\s+(?:gezogen|umgezogen)\b"),
        Frame("home", r"(?:daheim|zuhause|zu hause) bin ich\s+(?:in|im)\s+(?P<v>.+)"),
        Frame("home", r"(?:wohnort|stadt)\s*:\s*(?P<v>.+)|wohnhaft in\s+(?P<v2>.+)"),
        Frame("origin", _ICH + r"(?:komme?|stamme)\s+(?:{ADV})?(?:ursprünglich\s+)?aus\s+(?P<v>.+)"),
        Frame("origin", _ICH + r"bin\s+(?:{ADV})?(?:ursprünglich\s+)?aus\s+(?P<v>.+)"),
        Frame("origin", r"(?:ich\s+)?bin\s+in\s+(?P<v>.+?)\s+(?:geboren|aufgewachsen)\b|geboren (?:und aufgewachsen )?in\s+(?P<v2>.+)"),
        Frame("origin", _FRONTED + r"(?:komme|stamme) ich\s+aus\s+(?P<v>.+)|(?:ursprünglich|gebürtig) aus\s+(?P<v2>.+)|herkunft\s*:\s*(?P<v3>.+)"),
        Frame("studies", _ICH + r"studiere\s+(?:{ADV})?(?P<v>.+)"),
        Frame("studies", _FRONTED + r"studiere ich\s+(?P<v>.+)"),
        Frame("studies", r"ich (?:mache|schreibe)\s+(?:gerade\s+)?(?:meinen master|meinen bachelor|meine promotion|meinen doktor|eine ausbildung|ein studium)\s+(?:in|als|im bereich)\s+(?P<v>.+)"),
        Frame("occupation", _ICH + r"arbeite\s+(?:{ADV})?als\s+(?P<v>.+?)(?:\s+(?:bei|für)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", _FRONTED + r"arbeite ich als\s+(?P<v>.+?)(?:\s+(?:bei|für)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", r"(?:mein )?(?:beruf|job|arbeit)(?:-?mäßig|lich)?\s*(?::|ist)\s*(?P<v>.+)|von beruf bin ich\s+(?P<v2>.+)|beruflich bin ich\s+(?P<v3>.+)"),
        Frame("occupation", _ICH + r"bin\s+(?:{ADV})?(?:von beruf\s+)?(?:ein|eine)?\s*(?P<v>.+?)(?:\s+von beruf)?(?:\s+(?:bei|an der|am|im)\s+(?P<org>.+))?$", decoy=False),
        Frame("occupation", _ICH + r"unterrichte\s+(?P<v>.+)", template="teach"),
        Frame("employer", _ICH + r"arbeite\s+(?:{ADV})?(?:bei|für|im|am|in der|an der)\s+(?P<v>.+?)(?:\s+als\s+(?P<job>.+))?$"),
        Frame("employer", _FRONTED + r"arbeite ich\s+(?:bei|für)\s+(?P<v>.+?)(?:\s+als\s+(?P<job>.+))?$"),
        # Where, then the job: "ich arbeite in Berlin als Krankenpfleger", "… von zu Hause als …".
        Frame("occupation", _ICH + r"arbeite\s+(?:{ADV})?(?:in|von|aus)\s+\S.*?\s+als\s+(?P<v>.+)$", explicit=True),
        Frame("employer", _ICH + r"bin\s+(?:{ADV})?(?:bei|für)\s+(?P<v>.+?)\s+(?:angestellt|beschäftigt|tätig)$"),
        Frame("languages", _ICH + r"spreche\s+(?P<v>.+)|meine muttersprache ist\s+(?P<v2>.+)"),
        Frame("answers", r"(?:(?:kannst du|könntest du|können sie|könnten sie)\s+)?(?:{STANDING}\s+)?(?:mir\s+)?(?:bitte\s+)?(?:immer\s+)?(?:erklär mir|erkläre mir|erklär|antworte|antworten|antwortest|schreib|schreibe|schreiben|halte dich|fasse dich|fass dich)\s+(?:mir\s+)?(?:bitte\s+)?(?P<v>.+)", template="request"),
        Frame("answers", r"(?:(?:the|des|les|unas|las|le|die|delle)\s+)?(?:answers|replies|réponses|respuestas|risposte|antworten)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"(?:ich\s+)?(?:bevorzuge|mag|hätte gern|hätte lieber)\s+(?P<v>(?:\w+\s+){0,3}antworten\b.*)", template="whole"),
        Frame("answers", r"(?:bitte\s+)?keine\s+(?P<v>.+?)\s+in (?:deinen|ihren|den) antworten\b.*", template="without"),
        Frame("dislikes", _ICH + r"(?:hasse|verabscheue)\s+(?P<v>.+)"),
        Frame("dislikes", _ICH + r"mag\s+(?:kein(?:e|en)?)\s+(?P<v>.+)|ich mag\s+(?P<v2>.+?)\s+nicht$|ich kann\s+(?P<v3>.+?)\s+nicht\s+(?:leiden|ausstehen)"),
        Frame("likes", _ICH + r"(?:mag|liebe|bevorzuge)\s+(?P<v>.+)"),
        Frame("likes", r"(?:ich bin\s+)?(?:ein\s+|eine\s+)?(?:großer\s+|riesiger\s+|große\s+|riesige\s+)?fan\s+(?:von|vom|von der|des)\s+(?P<v>.+)|ich bin\s+(?:ein\s+|eine\s+)?(?:großer\s+|große\s+)?(?P<v2>\S+)-fan"),
        Frame("likes", _ICH + r"\w+\s+(?:sehr\s+|total\s+|wirklich\s+)?gerne?\s+(?P<v>.+)"),
        Frame("likes", _ICH + r"spiele?\s+(?:gerne?\s+)?(?P<v>.+)"),
        Frame("likes", r"(?:mein\s+)?lieblings\w+\s+ist\s+(?P<v>.+)|(?:meine\s+)?lieblings\w+\s+ist\s+(?P<v2>.+)|hobbys?\s*:\s*(?P<v3>.+)"),
        Frame("likes", r"ich lerne\s+(?:gerade\s+)?(?P<v>.+)|ich habe (?:angefangen|begonnen),?\s+(?P<v2>.+?)\s+zu\s+\w+", decoy=False),
        Frame("diet", _ICH + r"(?:bin|lebe|esse|ernähre mich)\s+(?:{ADV})?(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", _ICH + r"(?:esse|trinke)\s+(?:{ADV})?(?:seit\s+\S+(?:\s+\S+)?\s+)?(?:nie|niemals|kein(?:e|en)?|nicht mehr|keine? mehr)\s+(?P<v>.+)"),
        Frame("diet", _ICH + r"verzichte\s+(?:{ADV})?auf\s+(?P<v>.+)|ich habe aufgehört,?\s+(?P<v2>.+?)\s+zu (?:essen|trinken)"),
        Frame("diet", _ICH + r"(?:darf|vertrage)\s+kein(?:e|en)?\s+(?P<v>.+?)(?:\s+essen|\s+trinken)?$"),
        Frame("health", _ICH + r"bin\s+(?:{ADV})?(?:stark\s+|schwer\s+)?(?:allergisch|intolerant)\s+(?:gegen|auf)\s+(?P<v>.+)"),
        Frame("health", _ICH + r"(?:habe|leide an|leide unter)\s+(?:'?ne\s+)?(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("health", _ICH + r"bin\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("age", r"(?P<v>\d{2})(?:\s+jahre(?:\s+alt)?)?$", fragment=True, decoy=False),
        Frame("occupation", r"(?:ein|eine)?\s*(?P<v>[^\d,]+?)$", fragment=True, decoy=False),
        Frame("employer", r"(?:bei)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("origin", r"aus\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("name", r"(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+)?)$", template="here", fragment=True, decoy=False),
    ],
    other_frames=[
        Frame("relative_name", r"\s+(?:heißt|heisst|heißen|heissen|sind)\s+(?P<v>.+)|\s+namens\s+(?P<v2>.+)"),
        Frame("age", r"\s+ist\s+(?P<v>\d{1,3})(?:\s+jahre(?:\s+alt)?)?|\s+wird\s+(?P<v2>\d{1,3})\b"),
        Frame("home", r"\s+(?:wohnt|lebt)\s+(?:in|im|bei)\s+(?P<v>.+)"),
        Frame("origin", r"\s+(?:kommt|ist|stammt)\s+aus\s+(?P<v>.+)"),
        Frame("occupation", r"\s+arbeitet als\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r"\s+ist\s+(?:ein|eine)?\s*(?P<v>.+)"),
        Frame("employer", r"\s+arbeitet\s+(?:bei|für)\s+(?P<v>.+)"),
        Frame("studies", r"\s+studiert\s+(?P<v>.+)"),
        Frame("languages", r"\s+spricht\s+(?P<v>.+)"),
        Frame("health", r"\s+ist\s+(?:stark\s+|schwer\s+)?(?:allergisch|intolerant)\s+(?:gegen|auf)\s+(?P<v>.+)"),
        Frame("health", r"\s+hat\s+(?P<v>" + _CONDITIONS + r")\b.*", template="has"),
        Frame("diet", r"\s+(?:darf|verträgt|isst|kann)\s+kein(?:e|en)?\s+(?P<v>.+?)(?:\s+essen|\s+haben|\s+trinken|\s+vertragen)?$"),
        Frame("diet", r"\s+ist\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("health", r"\s+ist\s+(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("dislikes", r"\s+hasst\s+(?P<v>.+)"),
        Frame("likes", r"\s+(?:liebt|mag|spielt)\s+(?P<v>.+)"),
    ],
    possessive=r"(?:meine|mein|meinen|meinem|meiner|meines|unsere|unser|unseren|unserem|unserer)",
    relations=_RELATIVES,
    having=r"(?:ich habe|wir haben|ich hab|hab)",
    numbers=r"(?:eine?n?|zwei|drei|vier|fünf|\d)",
    counted=r"(?:zwei|drei|vier|fünf|[2-9])",
    naming=r"(?:namens|mit namen)",
    with_words="mit",
    value_ends=r"\s*[,;:!?()]|(?<!\bst)(?<!\bdr)\.|\s+(?:lol|haha|ahah|jaja|jeje|xd|mdr|ptdr)\b|\s+(?:und|aber|oder|weil|denn|seit|während|wenn|mit|dass"
    r"|jetzt|auch|nicht)\b",
    vague=word_set("""das es dies diese dieser dieses du dich dir dein deine ihr euch wie wann was
        wer alles nichts etwas"""),
    place_leads=word_set("""einem einer einen kleinen kleines dorf stadt bei in der nähe von nahe
        außerhalb am rand stadtrand vorort norden süden osten westen im raum umgebung
        landkreis"""),
    articles=word_set("der die das den dem des ein eine einen einem einer"),
    indefinite=word_set("ein eine einen einem einer"),
    preps=word_set("bei für in im an am auf aus von vom zu zum zur mit als seit"),
    standing=r"\b(?:ab jetzt|ab sofort|von nun an|von jetzt an|künftig|zukünftig|in zukunft|immer|standardmäßig|jedes mal)\b",
    tomorrow=r"\bmorgen\b",
    today=r"\b(?:heute|heute abend|heute morgen)\b",
    correction=r"^(?:(?:eigentlich|sorry|nein|korrektur|ich meinte)[,:!\s]+)*(?:es ist\s+|es ist also\s+)?(?P<new>[^,]+?),?\s+nicht\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:ich|mein|meine|meinen|meinem|meiner|wir|unser|unsere)\b",
    reported=r"\b(?:sagt|sagen|hat gesagt|meint|meinen|glaubt|laut|behauptet)\b",
    user_words=word_set("ich mich mir mein meine meinen meinem meiner wir uns unser unsere"),
    diets=_DIETS,
    takes_back=r"(?:^|[.,;!?]\s*)(?:warte,?\s+nein|nein,?\s+warte|ich meine|ich meinte|sorry,?\s+ich meine|also eigentlich|korrektur)(?!\w)[\s,:!]*",
    no_longer=r"(?:^|[,;.!?\-–—]\s*)(?:(?:also|bzw\.?|beziehungsweise|na ja|naja|oder),?\s+)?(?:ich\s+)?war(?:\s+ich)?(?:\s+mal)?(?=\s*(?:[,;.!?)]|$))|\b(?:nicht mehr|jetzt nicht mehr)(?=\s*(?:[,;.!?)]|$))|(?:^|[,;.!?\-–—]\s*|\b(?:und|aber|jetzt)\s+)(?:(?:ich\s+)?bin\s+(?:jetzt\s+|seit\s+\S+(?:\s+\S+)?\s+)?)?(?:in rente|in pension|pensioniert|im ruhestand)\b",
    asked_back=r"[,;]\s*¿?(?:und|was|wo|wie|wer|welche\w*|wann|warum|woher)\b[^,;]{0,40}?(?<!\w)(?:du|dich|dir|dein\w*|sie|ihr|euch|ihnen)(?!\w)[^,;]*\?\s*$",
    every_answer=r"\b(?:antworten|nachrichten)\b",
    about_the_user=r"(?:,|\s+und|\s+aber)\s+(?:\S+\s+){0,2}(?:mir|mich|ich|uns|wir)\b",
    closers=r"(?:\s*(?:\b(?:lol|haha\w*|hihi|btw|xd)\b|:\)|;\)|!+|[\U0001F300-\U0001FAFF\u2600-\u27BF]+))+\s*$",
    normal=(
        (r"\bheisse\b", "heiße"),
        # As people type it: "ich hab ne Laktoseintoleranz".
        (r"\bhab\b", "habe"),
    ),
    macros={
        "ADV": r"(?:(?:jetzt|momentan|derzeit|zurzeit|aktuell|inzwischen|mittlerweile|auch|schon"
        r"|noch|wirklich|ursprünglich|seit kurzem|gerade|eigentlich)\s+)+",
    },
)
# fmt: on
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
