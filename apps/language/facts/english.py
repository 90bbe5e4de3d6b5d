"""English: the constructions people use in a chat to say who they are."""

from __future__ import annotations

from apps.language.facts.grammar import Frame, Grammar, Relation
from apps.language.text import word_set

_RELATIVES = {
    **{w: Relation(w) for w in ["daughter", "son", "wife", "husband", "partner", "mother", "father", "sister", "brother", "girlfriend", "boyfriend", "fiancé", "fiancée", "child", "grandmother", "grandfather", "aunt", "uncle", "cousin", "niece", "nephew", "friend", "boss", "colleague", "roommate", "flatmate", "stepson", "stepdaughter", "stepmother", "stepfather"]},
    "mum": Relation("mother"), "mom": Relation("mother"), "mommy": Relation("mother"),
    "dad": Relation("father"), "daddy": Relation("father"), "grandma": Relation("grandmother"),
    "grandpa": Relation("grandfather"), "kid": Relation("child"), "hubby": Relation("husband"),
    "best friend": Relation("friend"), "little sister": Relation("sister"),
    "little brother": Relation("brother"), "older sister": Relation("sister"),
    "older brother": Relation("brother"), "younger sister": Relation("sister"),
    "younger brother": Relation("brother"), "baby": Relation("child"),
    **{w: Relation(w, pet=True) for w in ["dog", "cat", "puppy", "kitten", "parrot", "rabbit", "hamster", "horse"]},
}  # fmt: skip

_NAME = r"(?P<v>.+)"
GRAMMAR = Grammar(
    code="en",
    openers=r"^(?:(?:oh and|oh|and|also|plus|btw|by the way|fyi|f\.y\.i\.|heads up|ps|p\.s\.|"
    r"anyway|anyways|well|so|ok|okay|alright|actually|honestly|just so you know|for the record"
    r"|for context|quick note|note|fun fact|hi|hey|hello|yes|yeah|yep|sure|thanks|thank you"
    r"|please|um|uh|lol|haha|these days|nowadays|currently|right now|at the moment|now|today"
    r"|lately|for what it's worth|as you know|you know|i mean|fwiw)\b[\s,:;!.\-–—]*)+",
    clause_breaks=r"\s*;\s*|\s*[–—]\s*|,?\s+(?:and|but|so|while|though|although|plus)\s+"
    r"(?=(?:i|i'm|i've|i'd|my|we|we've|our|these days|now|currently|grew up|based|born"
    r"|originally|name's)\b)|,\s+(?!(?:and|but|or|too|please)\b)(?=\S)",
    negation=r"\b(?:not|never|no|none|nobody|nothing|neither|nor|no longer)\b|n't\b",
    unreal=r"\b(?:if|unless|would|wish|wanna|gonna|hope|hoping|dream|dreaming|maybe|perhaps|might"
    r"|could|should|someday|one day|pretend|imagine|supposed)\b|'d\b",
    conditional=r"\b(?:if|unless|suppose|supposing|imagine|what if|say|when|once|whenever)\b",
    past=r"\b(?:used to|formerly|previously|back then|anymore|any more|no longer|until|till|ex)\b",
    user_frames=[
        Frame("name", rf"(?:my )?name(?:'s| is)\s*:?\s+{_NAME}"),
        Frame("name", rf"name\s*:\s*{_NAME}"),
        Frame("name", rf"(?:i'm called|i go by)\s+{_NAME}"),
        Frame("name", rf"(?:you can |just |please )?call me\s+{_NAME}", template="weak"),
        Frame(
            "name",
            r"(?:i'm|this is)\s+(?P<v>[^\s,]+(?:\s+[^\s,]+)?)$",
            template="weak",
            decoy=False,
        ),
        Frame("name", r"(?P<v>\S+) here$", decoy=False),
        Frame(
            "age", r"i'm\s+(?:{ADV})?(?P<v>\d{1,3})(?:\s*(?:years? old|yrs? old|yo|y/o|years))?$"
        ),
        Frame("age", r"(?:i've |i have |i )?(?:just )?turned\s+(?P<v>\d{1,3})\b"),
        Frame("age", r"age\s*:\s*(?P<v>\d{1,3})$|(?P<v2>\d{1,3}) (?:years old|yo|y/o)$"),
        Frame("home", r"(?:i\s+)?(?:{ADV})?(?:live|reside|stay)\s+in\s+(?P<v>.+)"),
        Frame(
            "home",
            r"(?:i'm\s+)?(?:{ADV})?(?:based|living|located|settled)\s+(?:in|near|outside)\s+(?P<v>.+)",
        ),
        Frame("home", r"(?:i've |i have |i )?(?:{ADV})?(?:moved|relocated)\s+to\s+(?P<v>.+)"),
        Frame("home", r"(?:i\s+)?call\s+(?P<v>.+?)\s+home$|home is\s+(?P<v2>.+)"),
        Frame("home", r"(?:home|location|city)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)"),
        Frame("origin", r"(?:i'm\s+)?(?:{ADV})?from\s+(?P<v>.+)"),
        Frame("origin", r"(?:i\s+)?(?:{ADV})?come\s+from\s+(?P<v>.+)"),
        Frame(
            "origin",
            r"(?:i\s+)?(?:grew up|was born|was raised|born and raised|born)\s+in\s+(?P<v>.+)",
        ),
        Frame("occupation", r"(?:i\s+)?(?:{ADV})?work\s+as\s+(?P<v>.+)", explicit=True),
        Frame(
            "occupation",
            r"my (?:job|profession|occupation|day job|job title|role) is\s+(?P<v>.+)",
            explicit=True,
        ),
        Frame(
            "occupation",
            r"(?:work|job|profession|occupation)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)",
            explicit=True,
        ),
        Frame(
            "occupation",
            r"i'm\s+(?:{ADV})?(?P<v>an?\s+.+?)\s+by (?:profession|trade)",
            explicit=True,
        ),
        Frame("occupation", r"i'm\s+(?:{ADV})?(?P<v>an?\s+.+)", decoy=False),
        Frame("occupation", r"i\s+(?:{ADV})?(?:teach|lecture in)\s+(?P<v>.+)", template="teach"),
        Frame("employer", r"(?:i\s+)?(?:{ADV})?work\s+(?:at|for)\s+(?P<v>.+)"),
        Frame("employer", r"i'm\s+(?:{ADV})?(?:employed|working)\s+(?:at|by|for)\s+(?P<v>.+)"),
        Frame("studies", r"(?:i\s+)?(?:{ADV})?(?:study|major in)\s+(?P<v>.+)"),
        Frame(
            "studies",
            r"i'm\s+(?:{ADV})?(?:studying|majoring in|doing a degree in|doing a phd in|doing a master's in)\s+(?P<v>.+)",
        ),
        Frame("studies", r"(?:studies|study|major)(?:-wise| wise)?\s*[:\-]\s*(?P<v>.+)"),
        Frame("languages", r"(?:i\s+)?(?:{ADV})?(?:can\s+)?speak\s+(?P<v>.+)"),
        Frame("languages", r"i'm\s+(?:{ADV})?learning\s+(?P<v>.+)", decoy=False),
        Frame(
            "languages",
            r"i'm\s+(?:fluent|native|bilingual)\s+in\s+(?P<v>.+)|my (?:native|first|mother) (?:language|tongue) is\s+(?P<v2>.+)",
        ),
        Frame(
            "answers",
            r"(?:(?:could|can|would|will) you\s+)?(?:please\s+)?(?:always\s+)?(?:answer|reply|respond|write|talk to me|keep (?:it|your answers|your replies|answers|replies|things)|give me (?:your )?answers)\s+(?P<v>.+)",
            template="request",
        ),
        Frame(
            "answers",
            r"i (?:{ADV})?(?:prefer|like|want)\s+(?P<v>(?:\w+\s+){0,3}(?:answers|replies|responses))\b.*",
        ),
        Frame(
            "dislikes",
            r"(?:i\s+)?(?:{ADV})?(?:hate|dislike|detest|loathe|can't stand|cannot stand|don't like|do not like|don't enjoy|don't care for)\s+(?P<v>.+)",
        ),
        Frame("dislikes", r"i'm\s+not\s+(?:a (?:big )?fan of|into|keen on)\s+(?P<v>.+)"),
        Frame("likes", r"(?:i\s+)?(?:{ADV})?(?:like|love|enjoy|adore|prefer)\s+(?P<v>.+)"),
        Frame(
            "likes",
            r"i'm\s+(?:{ADV})?(?:a (?:big |huge )?fan of|into|crazy about|passionate about|keen on|obsessed with)\s+(?P<v>.+)",
        ),
        Frame("likes", r"my favou?rite\s+(?:\w+\s+){1,2}is\s+(?P<v>.+)"),
        Frame(
            "diet",
            r"i'm\s+(?:{ADV})?(?:a\s+)?(?P<v>vegetarian|vegan|pescatarian|pescetarian|plant-based|keto|halal|kosher)\b.*",
        ),
        Frame(
            "diet",
            r"(?:i(?:'ve| have)?\s+)?(?:{ADV})?(?:been\s+)?(?:gave up|given up|give up|quit|stopped eating|cut out|don't eat|do not eat|no longer eat|never eat|avoid|can't eat|cannot eat|can't have|cannot have)\s+(?P<v>.+)",
        ),
        Frame("diet", r"i'm\s+(?:{ADV})?(?:off|avoiding)\s+(?P<v>.+)"),
        Frame("diet", r"i(?:'ve| have) been\s+(?P<v>vegetarian|vegan|pescatarian)\b.*"),
        Frame(
            "health",
            r"i'm\s+(?:{ADV})?(?:severely |very |deathly |mildly )?(?:allergic|intolerant)\s+to\s+(?P<v>.+)",
        ),
        Frame(
            "health",
            r"i (?:{ADV})?have\s+(?P<v>(?:an?\s+)?(?:\w+\s+)?(?:allergy|intolerance)|diabetes|type [12] diabetes|asthma|celiac disease|coeliac disease|epilepsy|migraines|adhd|autism|a heart condition|high blood pressure|arthritis|crohn's)\b.*",
        ),
        Frame(
            "health",
            r"i'm\s+(?:{ADV})?(?P<v>diabetic|asthmatic|celiac|coeliac|lactose intolerant|gluten intolerant|pregnant|epileptic)\b.*",
        ),
    ],
    other_frames=[
        Frame(
            "relative_name",
            rf"(?:'s name is|'s called| is called| is named| goes by|, called|, named)\s+{_NAME}",
        ),
        Frame(
            "age",
            r" is (?P<v>\d{1,3})(?:\s*(?:years old|yo|y/o|months old))?$|(?:, | )(?P<v2>\d{1,3}),",
        ),
        Frame("home", r" (?:{ADV})?(?:lives|is based|is living)\s+in\s+(?P<v>.+)"),
        Frame("origin", r" (?:is|comes) from\s+(?P<v>.+)"),
        Frame("occupation", r" works as\s+(?P<v>.+)", explicit=True),
        Frame("occupation", r" is\s+(?P<v>an?\s+.+)"),
        Frame("employer", r" works (?:at|for)\s+(?P<v>.+)"),
        Frame("studies", r" (?:studies|is studying)\s+(?P<v>.+)"),
        Frame("languages", r" speaks\s+(?P<v>.+)"),
        Frame(
            "health",
            r" (?:is|'s) (?:{ADV})?(?:severely |very |deathly )?(?:allergic|intolerant) to\s+(?P<v>.+)",
        ),
        Frame(
            "health",
            r" (?:has|'s got)\s+(?P<v>(?:an?\s+)?(?:\w+\s+)?(?:allergy|intolerance)|diabetes|asthma|celiac disease|coeliac disease|epilepsy|autism|adhd)\b.*",
        ),
        Frame(
            "diet",
            r" (?:can't|cannot|can not|mustn't|doesn't|does not|won't) (?:have|eat|drink)\s+(?P<v>.+)",
        ),
        Frame("diet", r" (?:is|'s) (?:a )?(?P<v>vegetarian|vegan|pescatarian)\b.*"),
        Frame(
            "dislikes", r" (?:hates|dislikes|can't stand|doesn't like|does not like)\s+(?P<v>.+)"
        ),
        Frame(
            "likes", r" (?:{ADV})?(?:likes|loves|enjoys|adores|is into|is crazy about)\s+(?P<v>.+)"
        ),
    ],
    possessive=r"(?:my|our)",
    relations=_RELATIVES,
    having=r"(?:i|we) (?:have|'ve got|have got|got) (?:an?|one|two|three) (?P<rel>{REL})s?(?:,)?(?: (?:called|named)| who's called)? (?P<v>.+)",
    value_ends=r"\s*[,;:.!?()]|\s+(?:and|but|or|so|because|cause|since|though|although|while|which|who|where|if|when|with|for|btw|lol|haha|right now|at the moment|these days|now|currently|for now|as well|too)\b",
    vague=word_set("""it that this these those them him her you your yours one so too how when what where
    why if same whatever everything anything nothing something myself me us it's that's
    the idea the way talking chatting hearing having getting being doing"""),
    place_leads=word_set("""a an the small little tiny big large quiet village town city suburb outskirts of
    near outside just right close to north south east west northern southern eastern
    western central centre center downtown part area region countryside province rural
    village's middle heart"""),
    articles=word_set("""a an the"""),
    preps=word_set("""at in for with on from near by of"""),
    standing=r"\b(?:from now on|going forward|in (?:the )?future|from here on|by default|always|every time|henceforth|for every answer)\b",
    tomorrow=r"\btomorrow\b",
    today=r"\b(?:today|tonight|this (?:morning|afternoon|evening))\b",
    correction=r"^(?:(?:actually|sorry|oops|correction|wait|no|i mean|i meant)[,:!\s]+)*"
    r"(?:it's |it is |that's |i meant )?(?P<new>[^,]+?),?\s+not\s+(?P<old>[^,.!?]+?)[.!]?$",
    first_person=r"^(?:i|i'm|i've|i'd|i'll|my|we|we're|we've|our)\b",
    reported=r"\b(?:says?|said|told|tells|thinks?|thought|claims?|according to|reckons?)\b",
    user_words=word_set("""i i'm me my mine myself we us our"""),
    diets=r"vegetarian|vegan|pescatarian|pescetarian|plant-based|keto|halal|kosher",
    normal=(
        (r"\bi am\b", "i'm"),
        (r"^im\b", "i'm"),
        (r"\bi have got\b|\bi've got\b", "i have"),
        (r"\bcan not\b", "cannot"),
        (r"^(?:i'm |i )?(?:(?:born|raised) and (?:raised|bred)|was born and raised)\b", "born"),
    ),
    macros={
        "ADV": r"(?:(?:also|still|currently|now|actually|really|just|recently|originally|mostly"
        r"|usually|basically|officially|finally|already|even|totally|absolutely|truly|happily)\s+)+",
    },
)
GRAMMAR.macros["REL"] = GRAMMAR.relation_words
