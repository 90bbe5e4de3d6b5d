"""English: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

# fmt: off
_RELATIVES = {
    **{word: Relation(word) for word in word_set("""daughter son wife husband partner mother
        father sister brother girlfriend boyfriend fiancé fiancée child grandmother grandfather
        aunt uncle cousin niece nephew friend boss colleague roommate flatmate stepson
        stepdaughter stepmother stepfather""")},
    "mum": Relation("mother"), "mom": Relation("mother"), "dad": Relation("father"),
    "grandma": Relation("grandmother"), "grandpa": Relation("grandfather"),
    "kid": Relation("child"), "hubby": Relation("husband"), "baby": Relation("child"),
    "bf": Relation("boyfriend"), "gf": Relation("girlfriend"), "wifey": Relation("wife"),
    "missus": Relation("wife"), "other half": Relation("partner"), "bestie": Relation("friend"),
    "bff": Relation("friend"), "sis": Relation("sister"), "fiance": Relation("fiancé"),
    "fiancee": Relation("fiancée"), "grandad": Relation("grandfather"),
    "granddad": Relation("grandfather"), "nan": Relation("grandmother"),
    "nana": Relation("grandmother"), "gran": Relation("grandmother"),
    "stepmom": Relation("stepmother"), "stepmum": Relation("stepmother"),
    "best friend": Relation("friend"), "little sister": Relation("sister"),
    "little brother": Relation("brother"), "older sister": Relation("sister"),
    "older brother": Relation("brother"), "younger sister": Relation("sister"),
    "younger brother": Relation("brother"), "twin": Relation("sibling"),
    "granddaughter": Relation("granddaughter"), "grandson": Relation("grandson"),
    "grandchild": Relation("grandchild"), "grandkid": Relation("grandchild"),
    "mother-in-law": Relation("mother-in-law"), "father-in-law": Relation("father-in-law"),
    "guinea pig": Relation("guinea pig", pet=True),
    **{word: Relation(word, pet=True) for word in
       word_set("dog cat puppy kitten parrot rabbit hamster horse tortoise turtle")},
}
_I_AM = r"(?:i'm\s+)?(?:{ADV})?"  # a fragment drops it: "based in Leeds", "big fan of jazz"
_I = r"(?:i\s+)?(?:{ADV})?"
_ALLERGENS = r"(?:\w+\s+)?(?:allergy|allergies|intolerance)"
_CONDITIONS = (r"alzheimer's|alzheimers|parkinson's|dementia|type [12] diabetes|diabetes|asthma|celiac disease|coeliac disease|epilepsy|"
               r"migraines|adhd|autism|a heart condition|high blood pressure|arthritis|crohn's|ibs")
_DIAGNOSED = (r"type [12] diabetic|diabetic|asthmatic|celiac|coeliac|lactose intolerant|"
              r"gluten intolerant|pregnant|epileptic|dyslexic|autistic|deaf|blind|colou?r ?blind")
_DIETS = r"vegetarian|vegan|pescatarian|pescetarian|plant-based|keto|halal|kosher|teetotal"

GRAMMAR = Grammar(
    code="en",
    openers=r"^(?:(?:oh and|oh|and|also|plus|btw|by the way|fyi|f\.y\.i\.|heads up|ps|p\.s\.|"
    r"anyway|anyways|well|so|ok|okay|alright|actually|honestly|just so you know|for the record"
    r"|for context|quick note|note|fun fact|quick intro|intro|about me|hi there|hi|hey|hello|good morning|good evening|howdy|hiya|heya|hey there|hello there|yo"
    r"|yes|yeah|yep|sure|thanks|thank you|please|um|uh|lol|haha|these days|nowadays|currently"
    r"|right now|at the moment|now|today|lately|for what it's worth|as you know|you know"
    r"|i mean|fwiw|correction|sorry|oops)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:and|but|so|while|though|although|plus)\s+"
    r"(?=(?:i|i'm|im|i've|i'd|my|we|we've|our|these days|now|currently|grew up|based|born"
    r"|originally|name's|live|living|work|working|study|studying|just|also|recently|love"
    r"|speak)\b)|,\s+(?!(?:and|but|or|too|please|not)\b)(?=\S)",
    negation=r"\b(?:not|never|no|none|nobody|nothing|neither|nor|no longer)\b|n't\b",
    unreal=r"\b(?:if|unless|would|wish|wanna|gonna|hope|hoping|dream|dreaming|maybe|perhaps|might"
    r"|could|should|someday|one day|pretend|imagine|supposed|want to|wants to|plan to|planning"
    r"|going to|thinking of|thinking about|considering|intend|trying to)\b|'d\b",
    conditional=r"\b(?:if|unless|suppose|supposing|imagine|what if|say|when|once|whenever)\b",
    passing=r"\b(?:this (?:week|weekend|month)|at (?:my|a friend's|friends')|with (?:my|friends|family) for|for (?:a few|a couple of) (?:days|weeks)"
    r"|for the (?:weekend|week|holidays|summer)|on (?:holiday|vacation|a trip|business)"
    r"|visiting|temporarily|for now)\b",
    past=r"\b(?:used to|formerly|previously|back then|anymore|any more|no longer|until|till"
    r"|ex)\b",
    user_frames=[
        Frame("name", r"(?:my )?name(?:'s| is)\s*:?\s+(?P<v>.+)"),
        Frame("name", r"name\s*:\s*(?P<v>.+)"),
        Frame("name", r"(?:i'm called|i go by)\s+(?P<v>.+)"),
        Frame("name", r"(?:you can |just |please )?call me\s+(?P<v>.+)", template="weak"),
        Frame("name", r"(?:i'm|this is)\s+(?P<v>[^\s,]+(?:\s+[^\s,]+)?)$", template="weak", decoy=False),
        Frame("name", r"(?P<v>\S+) here$", template="here", decoy=False),
        Frame("age", r"(?:i'm\s+)?(?:{ADV})?(?P<v>\d{1,3})\s*(?:years old|yrs old|year old|yo|y/o)\b"),
        Frame("age", r"i'm\s+(?:{ADV})?(?P<v>\d{1,3})(?:\s+years)?(?=$|\s*,|\s+(?:and|but|so|btw|lol)\b)"),
        Frame("age", r"(?:i've |i have |i )?(?:just )?turned\s+(?P<v>\d{1,3})\b"),
        Frame("age", r"age\s*:\s*(?P<v>\d{1,3})$"),
        Frame("home", _I + r"(?:live|reside)\s+(?:with\s+(?:my|our)\s+[^,]+?\s+)?in\s+(?P<v>.+)"),
        Frame("home", r"(?:i've\s+|i have\s+)?been\s+(?:living|livin|based)\s+in\s+(?P<v>.+)"),
        Frame("home", r"i(?:'ve| have)\s+(?:{ADV})?lived\s+in\s+(?P<v>.+?)\s+(?:for|since)\b.*"),
        # Since a year or a stage of life, not "since Tuesday": that is a stay.
        Frame("home", r"(?:i've|i have)\s+(?:{ADV})?been\s+in\s+(?P<v>.+?)\s+(?:since\s+(?:\d{4}|uni|university|college|school|childhood|forever|birth|ages|the (?:\d0s|\d{4}s)|i was\b)|for (?:\w+ )?(?:years|yrs|decades)\b).*"),
        Frame("home", _I_AM + r"(?:based|living|livin|located|settled)\s+(?:in|near|outside)\s+(?P<v>.+)"),
        Frame("home", r"(?:i've |i have |i )?(?:{ADV})?(?:moved|relocated)\s+to\s+(?P<v>.+)"),
        Frame("home", r"(?:i\s+)?call\s+(?P<v>.+?)\s+home$|home is\s+(?P<v2>.+)"),
        Frame("home", r"(?:home|location|city|town|based)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)"),
        Frame("origin", _I_AM + r"from\s*:?\s+(?P<v>.+)"),
        Frame("origin", _I + r"come\s+from\s+(?P<v>.+)"),
        Frame("origin", r"(?:i\s+)?(?:grew up|was born|was raised|born|raised)\s+in\s+(?P<v>.+)"),
        Frame("origin", r"(?:origin|hometown|home town)\s*:\s*(?P<v>.+)"),
        Frame("studies", _I + r"(?:study|major in)\s+(?P<v>.+)"),
        Frame("studies", _I_AM + r"(?:studying|majoring in|doing (?:a|my) (?:degree|phd|master's|masters|ba|bsc|ma|msc|bachelor's) in)\s+(?P<v>.+)"),
        Frame("studies", r"(?:studies|study|major|degree)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)"),
        Frame("studies", r"i'm\s+(?:{ADV})?an?\s+(?:\w+\s+)?student\s+(?:of|in)\s+(?P<v>.+)"),
        Frame("occupation", _I + r"work\s+as\s+(?P<v>.+?)(?:\s+(?:at|for)\s+(?P<org>.+))?$", explicit=True),
        Frame("occupation", r"my (?:job|profession|occupation|day job|job title|role) is\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r"(?:work|job|profession|occupation)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)", explicit=True),
        Frame("occupation", r"(?:i'm\s+)?(?:{ADV})?(?P<v>(?:an?\s+)?.+?)\s+by (?:profession|trade)", explicit=True),
        Frame("occupation", r"i\s+(?:{ADV})?drive\s+(?:an?\s+)?(?P<v>taxi|cab|bus|truck|lorry|tram|forklift|ambulance|train)\b.*", template="teach"),
        Frame("occupation", r"i'm\s+(?:{ADV})?(?P<v>an?\s+.+?)(?:\s+(?:at|for)\s+(?P<org>[A-Za-z].+))?$", decoy=False),
        Frame("occupation", r"i\s+(?:{ADV})?(?:teach|lecture in)\s+(?P<v>.+)", template="teach"),
        # Where, then the job: "i work in London as a nurse", "i work from home as a translator".
        Frame("occupation", _I + r"work\s+(?:{ADV})?(?:in|from|near|out of)\s+\S.*?\s+as\s+(?P<v>an?\s+.+)$", explicit=True),
        Frame("occupation", _I + r"work\s+(?:{ADV})?in\s+(?P<v>.+)", template="field"),
        Frame("occupation", r"(?:i(?:'ve| have)?\s+)?(?:{ADV})?(?:got\s+|been\s+|was\s+)?(?:moved up|promoted|bumped up)\s+to\s+(?P<v>.+)", explicit=True),
        Frame("employer", r"(?:i\s+|i'm\s+)?(?:{ADV})?(?:work|working|employed)\s+(?:{ADV})?(?:at|for|by)\s+(?P<v>.+?)(?:\s+as\s+(?P<job>.+))?$"),
        Frame("employer", r"(?:employer|company)\s*:\s*(?P<v>.+)"),
        Frame("employer", r"(?:i\s+)?(?:{ADV})?(?:landed|got|started|start)\s+(?:a|my|a new|my new)\s+job\s+(?:at|with)\s+(?P<v>.+)"),
        Frame("languages", _I + r"(?:can\s+)?speak\s+(?P<v>.+)"),
        Frame("languages", r"i'm\s+(?:fluent|native|bilingual)\s+in\s+(?P<v>.+)|my (?:native|first|mother) (?:language|tongue) is\s+(?P<v2>.+)"),
        Frame("answers", r"(?:(?:could|can|would|will) you\s+)?(?:please\s+)?(?:always\s+)?(?:explain things|explain|answer|reply|respond|write|talk to me|keep (?:it|your answers|your replies|answers|replies|things)|give me (?:your )?answers)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"(?:(?:the|des|les|unas|las|le|die|delle)\s+)?(?:answers|replies|réponses|respuestas|risposte|antworten)\s+(?P<v>.+)", template="request"),
        Frame("answers", r"i (?:{ADV})?(?:prefer|like|want)\s+(?P<v>(?:\w+\s+){0,3}(?:answers|replies|responses)\b.*)", template="whole"),
        Frame("answers", r"(?:please\s+)?(?:no|fewer|less)\s+(?P<v>.+?)\s+in (?:your )?(?:answers|replies|responses)\b.*", template="without"),
        Frame("answers", r"(?:please\s+)?(?:don't|do not|never)\s+use\s+(?P<v>.+?)\s*(?:in (?:your )?(?:answers|replies|responses))?$", template="without"),
        Frame("dislikes", _I + r"(?:hate|dislike|detest|loathe|can't stand|cannot stand|don't like|do not like|don't enjoy|don't care for)\s+(?P<v>.+)"),
        Frame("dislikes", r"i'm\s+not\s+(?:a (?:big )?fan of|into|keen on)\s+(?P<v>.+)"),
        Frame("likes", _I + r"(?:like|love|enjoy|adore|prefer)\s+(?P<v>.+)"),
        Frame("likes", r"(?:i'd|i would) (?:much )?rather\s+(?P<v>.+)"),
        Frame("likes", _I_AM + r"(?:an?\s+)?(?:(?:big|huge|massive|keen)\s+)?(?:fan of|sucker for|lover of)\s+(?P<v>.+)"),
        Frame("likes", _I_AM + r"(?:into|crazy about|passionate about|keen on|obsessed with|hooked on)\s+(?P<v>.+)"),
        Frame("likes", _I_AM + r"(?:an?\s+)?(?:big|huge|massive|die-hard|diehard)\s+(?P<v>.+?)\s+fan$"),
        Frame("origin", _I_AM + r"(?P<v>[a-z]+)$|(?:of|with)\s+(?P<v2>[a-z]+)\s+(?:origin|roots|heritage)$", template="demonym", decoy=False),
        Frame("likes", r"my favou?rite\s+(?:\w+\s+){1,2}is\s+(?P<v>.+)"),
        Frame("likes", r"(?:hobbies|hobby|interests|likes)\s*:\s*(?P<v>.+)"),
        Frame("likes", r"(?:i(?:'ve| have)?\s+)?(?:{ADV})?(?:started|took up|taken up|began)\s+(?P<v>(?:learning|playing|doing|practising|practicing)?\s*.+)"),
        Frame("likes", _I_AM + r"learning\s+(?P<v>.+)", decoy=False),
        Frame("diet", _I_AM + r"(?:a\s+)?(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"(?:i(?:'ve| have)?\s+)?(?:{ADV})?(?:been\s+)?(?:gave up|given up|give up|quit|stopped eating|cut out|don't eat|do not eat|no longer eat|never eat|avoid|can't eat|cannot eat|can't have|cannot have)\s+(?P<v>.+)"),
        Frame("diet", r"i (?:only )?eat\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"i'm\s+(?:{ADV})?(?:off|avoiding)\s+(?P<v>.+)"),
        Frame("diet", r"(?:i(?:'ve| have)\s+)?been\s+(?P<v>" + _DIETS + r")\b.*"),
        Frame("diet", r"(?:diet|food)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)"),
        Frame("health", _I_AM + r"(?:severely |very |deathly |mildly |really )?(?:allergic|intolerant)\s+to\s+(?P<v>.+)"),
        Frame("health", r"i (?:{ADV})?(?:have|suffer from|live with)\s+(?P<v>(?:an?\s+)?" + _ALLERGENS + r"|" + _CONDITIONS + r")\b.*", template="has"),
        Frame("health", _I_AM + r"(?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("likes", r"(?P<topic>[a-z]+)(?:-wise| wise)\s*:\s*(?P<v>.+)", decoy=False),
        # Fragments of an introduction: "Anh, 26, UX designer", "33, accountant, live in Perth".
        Frame("age", r"(?P<v>\d{2})$", fragment=True, decoy=False),
        Frame("occupation", r"(?:an?\s+)?(?P<v>[^\d,]+?)$", fragment=True, decoy=False),
        Frame("employer", r"(?:at|for)\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("origin", r"from\s+(?P<v>.+)$", fragment=True, decoy=False),
        Frame("name", r"(?P<v>[^\W\d_]+(?:\s+[^\W\d_]+)?)$", template="here", fragment=True, decoy=False),
    ],
    other_frames=[
        Frame("relative_name", r"(?:'s name is|'s called| is called| is named| goes by|, called|, named| are called| are named| are)\s+(?P<v>.+)"),
        Frame("age", r" is (?P<v>\d{1,3})(?:\s*(?:years old|yo|y/o|months old))?$|(?:, | )(?P<v2>\d{1,3}),"),
        Frame("home", r" (?:{ADV})?(?:lives|is based|is living)\s+in\s+(?P<v>.+)"),
        Frame("origin", r" (?:is|comes) from\s+(?P<v>.+)"),
        Frame("occupation", r" works as\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r" is\s+(?P<v>an?\s+.+)"),
        Frame("employer", r" works (?:at|for)\s+(?P<v>.+)"),
        Frame("studies", r" (?:studies|is studying)\s+(?P<v>.+)"),
        Frame("languages", r" speaks\s+(?P<v>.+)"),
        Frame("health", r" (?:is|'s) (?:{ADV})?(?:severely |very |deathly )?(?:allergic|intolerant) to\s+(?P<v>.+)"),
        Frame("health", r" (?:has|'s got)\s+(?P<v>(?:an?\s+)?" + _ALLERGENS + r"|" + _CONDITIONS + r")\b.*", template="has"),
        Frame("diet", r" (?:can't|cannot|can not|mustn't|doesn't|does not|won't) (?:have|eat|drink)\s+(?P<v>.+)"),
        Frame("diet", r" (?:is|'s) (?:a )?(?P<v>" + _DIETS + r")\b.*"),
        Frame("health", r" (?:is|'s) (?P<v>" + _DIAGNOSED + r")\b.*", template="is"),
        Frame("dislikes", r" (?:hates|dislikes|can't stand|doesn't like|does not like)\s+(?P<v>.+)"),
        Frame("likes", r" (?:{ADV})?(?:likes|loves|enjoys|adores|is into|is crazy about|plays)\s+(?P<v>.+)"),
    ],
    possessive=r"(?:my|our)",
    relations=_RELATIVES,
    having=r"(?:(?:i|we) (?:have|got)|got)",
    numbers=r"(?:an?|one|two|three|four|five|\d)",
    counted=r"(?:two|three|four|five|[2-9])",
    naming=r"(?:called|named|who's called|who is called)",
    with_words="with",
    value_ends=r"\s*[,;:!?()]|(?<!\bst)(?<!\bdr)\.|\s+(?:and|but|or|so|because|cause|since|though|although|while"
    r"|which|who|where|if|when|with|for|btw|lol|haha|right now|at the moment|these days|now"
    r"|currently|for now|as well|too|not|actually|last (?:week|month|year)|this (?:week|month|year)"
    r"|(?:a|two|three|a few|a couple of) (?:days|weeks|months|years) ago)\b",
    vague=word_set("""it that this these those them him her you your yours one so too how when
        what where why if same whatever everything anything nothing something myself me us
        it's that's talking chatting hearing having getting being doing"""),
    place_leads=word_set("""a an the small little tiny big large quiet village town city suburb
        outskirts of near outside just right close to north south east west northern southern
        eastern western central centre center downtown part area region countryside province
        rural village's middle heart"""),
    articles=word_set("a an the"),
    indefinite=word_set("a an"),
    preps=word_set("at in for with on from near by of as"),
    standing=r"\b(?:from now on|going forward|in (?:the )?future|from here on|by default|always"
    r"|every time|henceforth|for every answer)\b",
    tomorrow=r"\btomorrow\b",
    today=r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b",
    correction=r"^(?:(?:actually|sorry|oops|correction|wait|no|i mean|i meant)[,:!\s]+)*"
    r"(?:it's |it is |that's |i meant )?(?P<new>[^,]+?),?\s+not\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our)\b",
    reported=r"\b(?:says?|said|told|tells|thinks?|thought|claims?|according to|reckons?)\b",
    # Not "our": English memories write it "their" ("my wife is expecting our first baby").
    user_words=word_set("i i'm me my mine myself we us"),
    diets=_DIETS,
    takes_back=r"(?:^|[.,;!?]\s*)(?:(?:sorry|oops),?\s+)?(?:wait,?\s+no|no,?\s+wait|i meant|i mean|actually,?\s+no|no,?\s+actually|well,?\s+actually|scratch that|or rather|make that|correction)\b[\s,:!]*",
    no_longer=r"(?:^|[,;.!?\-–—]\s*)(?:(?:well|or|at least|or rather|ok|okay),?\s+)?(?:i\s+)?(?:was|used to be|used to)(?:\s+anyway)?(?=\s*(?:[,;.!?)]|$))|\b(?:not anymore|no longer|not any more)(?=\s*(?:[,;.!?)]|$))|(?:^|[,;.!?\-–—]\s*|\b(?:and|but|now)\s+)(?:i'm\s+|i\s+)?(?:retired|quit|left)\s+(?:last|this|in\s+\d+|\d+|a\s+(?:few|couple)|years|months|ages)\b",
    asked_back=r"[,;]\s*¿?(?:and|what|what's|whats|where|where's|how|how's|who|which|when|why|wbu|hbu)\b[^,;]{0,40}?(?<!\w)(?:you|u|your|yours|yourself|wbu|hbu)(?!\w)[^,;]*\?\s*$",
    every_answer=r"\b(?:replies|answers|responses|messages)\b",
    closers=r"(?:\s*(?:\b(?:btw|lol|lmao|rofl|fyi|tbh|tho|haha\w*|hehe\w*|xx+)\b|:\)|:d\b|;\)|!+|[\U0001F300-\U0001FAFF\u2600-\u27BF]+))+\s*$",
    normal=(
        (r"\bi am\b", "i'm"),
        (r"^im\b", "i'm"),
        (r"\bive\b", "i've"),
        (r"\b(?:pls|plz|plse)\b", "please"),
        (r"\b(do|does|did|can|is|are|was|were|have|has|would|could|should|wo)nt\b", r"\1n't"),
        (r"\bi have got\b|\bi've got\b", "i have"),
        (r"\bwe have got\b|\bwe've got\b", "we have"),
        (r"\bcan not\b", "cannot"),
        (r"^(?:i'm |i )?(?:(?:born|raised) and (?:raised|bred)|was born and raised)\b", "born"),
    ),
    macros={
        "ADV": r"(?:(?:also|still|currently|now|actually|really|just|recently|originally|mostly"
        r"|usually|basically|officially|finally|already|even|totally|absolutely|truly|happily"
        r"|remotely|full-time|part-time|freelance)\s+)+",
    },
)
# fmt: on
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
