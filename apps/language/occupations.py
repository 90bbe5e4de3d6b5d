"""Whether words name an occupation or a language, in the five languages: compact lexicons of
the jobs and languages people name in a chat, with the endings of job words for the rest."""

from __future__ import annotations

import re

_JOBS = {
    "en": """nurse doctor physician surgeon dentist vet veterinarian pharmacist paramedic midwife
        teacher professor lecturer tutor student researcher scientist engineer developer
        programmer coder dev devops swe lead architect designer artist painter musician singer
        writer author
        journalist editor translator interpreter lawyer attorney solicitor judge accountant
        banker consultant analyst manager director ceo cto founder entrepreneur freelancer
        carpenter plumber electrician mechanic builder farmer chef cook baker butcher waiter
        waitress bartender barista cashier clerk secretary receptionist driver pilot sailor
        soldier officer policeman policewoman firefighter cop photographer actor actress
        dancer librarian psychologist therapist psychiatrist pediatrician cleaner gardener
        hairdresser barber tailor salesman saleswoman accountant economist mathematician
        physicist chemist biologist historian linguist philosopher priest nanny caregiver
        carer housewife househusband retiree pensioner intern apprentice technician
        administrator sysadmin tester data-scientist optician radiographer sonographer
        physiotherapist physio courier postman miner welder roofer painter-decorator
        translator copywriter marketer recruiter realtor broker trader investor paramedic
        chiropractor dietitian nutritionist social worker counsellor counselor carer
        warehouse operative forklift driver trucker lorry electrician gardener""",
    "it": """infermiere infermiera medico dottore dottoressa chirurgo dentista veterinario
        veterinaria farmacista ostetrica insegnante maestro maestra professore professoressa prof
        studente studentessa ricercatore ricercatrice scienziato ingegnere sviluppatore
        sviluppatrice programmatore programmatrice architetto designer artista pittore
        pittrice musicista cantante scrittore scrittrice giornalista traduttore traduttrice
        avvocato avvocatessa giudice commercialista contabile bancario consulente analista
        manager direttore direttrice imprenditore imprenditrice falegname idraulico
        elettricista meccanico muratore contadino agricoltore cuoco cuoca chef panettiere
        macellaio cameriere cameriera barista cassiere cassiera impiegato impiegata
        segretaria autista pilota poliziotto poliziotta pompiere fotografo fotografa attore
        attrice ballerino ballerina bibliotecario psicologo psicologa terapeuta pensionato
        pensionata parrucchiere parrucchiera sarto sarta commesso commessa tecnico
        fisioterapista postino operaio operaia badante casalinga avvocata commercialista
        traduttrice freelance grafico grafica informatico informatica programmatore
        ricercatrice dottorando dottoranda tassista camionista magazziniere infermiera
        cuoca pasticcere pasticcera estetista fornaio fornaia elettrauto meccanico
        idraulica falegname""",
    "fr": """infirmier infirmière médecin docteur chirurgien chirurgienne dentiste vétérinaire
        pharmacien pharmacienne sage-femme enseignant enseignante professeur professeure
        prof instituteur institutrice étudiant étudiante chercheur chercheuse scientifique
        ingénieur ingénieure développeur développeuse programmeur architecte designer
        artiste peintre musicien musicienne chanteur chanteuse écrivain écrivaine auteur
        journaliste traducteur traductrice avocat avocate juge comptable banquier banquière
        consultant consultante analyste directeur directrice entrepreneur entrepreneuse
        menuisier plombier électricien mécanicien maçon agriculteur agricultrice cuisinier
        cuisinière chef boulanger boulangère boucher serveur serveuse barman caissier
        caissière employé employée secrétaire chauffeur pilote policier policière pompier
        photographe acteur actrice danseur danseuse bibliothécaire psychologue thérapeute
        retraité retraitée coiffeur coiffeuse couturier couturière vendeur vendeuse
        technicien technicienne kinésithérapeute kiné facteur ouvrier ouvrière prof
        aide-soignant aide-soignante comptable graphiste développeuse conducteur conductrice
        chauffeur chauffeuse éducateur éducatrice orthophoniste pâtissier pâtissière
        fleuriste libraire notaire""",
    "de": """krankenpfleger krankenschwester pflegerin pfleger arzt ärztin chirurg chirurgin
        zahnarzt zahnärztin tierarzt tierärztin apotheker apothekerin hebamme lehrer lehrerin
        professor professorin student studentin forscher forscherin wissenschaftler
        wissenschaftlerin ingenieur ingenieurin entwickler entwicklerin programmierer
        programmiererin architekt architektin designer designerin künstler künstlerin maler
        malerin musiker musikerin sänger sängerin schriftsteller schriftstellerin autor
        autorin journalist journalistin übersetzer übersetzerin anwalt anwältin
        rechtsanwalt rechtsanwältin richter richterin buchhalter buchhalterin bankkaufmann
        berater beraterin analyst analystin manager managerin direktor direktorin
        unternehmer unternehmerin tischler tischlerin schreiner klempner elektriker
        mechaniker mechanikerin maurer bauer bäuerin koch köchin bäcker bäckerin metzger
        kellner kellnerin barkeeper kassierer kassiererin sekretärin fahrer fahrerin pilot
        pilotin polizist polizistin feuerwehrmann fotograf fotografin schauspieler
        schauspielerin tänzer tänzerin bibliothekar psychologe psychologin therapeut
        therapeutin rentner rentnerin friseur friseurin schneider schneiderin verkäufer
        verkäuferin techniker technikerin physiotherapeut physiotherapeutin briefträger
        erzieher erzieherin altenpfleger altenpflegerin lokführer lokführerin elektriker
        elektrikerin softwareentwickler softwareentwicklerin physiotherapeut
        physiotherapeutin pflegefachkraft lehrer steuerberater steuerberaterin busfahrer
        busfahrerin""",
    "es": """enfermero enfermera médico médica doctor doctora cirujano cirujana dentista
        veterinario veterinaria farmacéutico farmacéutica matrona profesor profesora profe maestro
        maestra estudiante investigador investigadora científico científica ingeniero
        ingeniera desarrollador desarrolladora programador programadora arquitecto
        arquitecta diseñador diseñadora artista pintor pintora músico música cantante
        escritor escritora periodista traductor traductora abogado abogada juez jueza
        contable contador contadora banquero banquera consultor consultora analista gerente
        director directora empresario empresaria carpintero carpintera fontanero plomero
        electricista mecánico mecánica albañil agricultor agricultora cocinero cocinera
        chef panadero panadera carnicero camarero camarera mesero mesera cajero cajera
        secretario secretaria conductor conductora piloto policía bombero bombera fotógrafo
        fotógrafa actor actriz bailarín bailarina bibliotecario psicólogo psicóloga
        terapeuta jubilado jubilada peluquero peluquera sastre vendedor vendedora técnico
        técnica fisioterapeuta cartero obrero obrera niñera camionero camionera auxiliar
        programador programadora periodista electricista fontanera repartidor repartidora
        traductora administrativo administrativa abogada carpintera panadera""",
}
JOB_WORDS = {language: frozenset(text.split()) for language, text in _JOBS.items()}
# The endings of English job words ("welder", "florist", "librarian", "consultant"): taken
# only after a construction that says the words are a job ("I work as", "my job is").
_JOB_ENDING = re.compile(r"(?:er|or|ist|ian|ant|ent|eon|ect|ographer|smith|man|woman)s?$")
# A job word may come after words that say which ("night nurse", "software engineer").
MAX_JOB_WORDS = 4


def is_job(words: list[str], *, language: str, stated_as_job: bool) -> bool:
    """Do `words` (a noun phrase without its article) name an occupation? Its last word, or
    its first before "at"/"in" ("nurse at a hospital"), must be a job word of the language;
    after a construction that says so ("I work as"), an English word with a job's ending."""
    if not words or len(words) > MAX_JOB_WORDS:
        return False
    known = JOB_WORDS.get(language, frozenset())
    folded = [word.casefold() for word in words]
    if any(form in known for form in (*_genders(folded[-1], language),
                                      *_genders(folded[0], language))):  # fmt: skip
        return True
    # German writes a job in one word: "Softwareentwicklerin", "Intensivpfleger".
    if language == "de" and any(folded[0].endswith(job) for job in known if len(job) >= 5):
        return True
    head = folded[-1]
    return stated_as_job and language == "en" and bool(_JOB_ENDING.search(head))


# A job word's other gender by its regular ending, where the lists name one form only
# ("bibliotecaria" for "bibliotecario", "boulangère" for "boulanger", "Ärztin" for "Arzt").
_GENDER_ENDINGS = {
    "it": (("trice", "tore"), ("essa", "e"), ("iera", "iere"), ("a", "o"), ("o", "a")),
    "es": (("ora", "or"), ("a", "o"), ("o", "a"), ("or", "ora")),
    "fr": (("ière", "ier"), ("euse", "eur"), ("trice", "teur"), ("ienne", "ien"),
           ("enne", "en"), ("ère", "er"), ("e", ""), ("eur", "euse"), ("ier", "ière")),
    "de": (("ärztin", "arzt"), ("in", ""),),
    "en": (("ess", ""), ("woman", "man")),
}  # fmt: skip


def _genders(word: str, language: str) -> tuple[str, ...]:
    forms = [word]
    for ending, other in _GENDER_ENDINGS.get(language, ()):
        if word.endswith(ending) and len(word) > len(ending) + 2:
            forms.append(word[: len(word) - len(ending)] + other)
    return tuple(forms)


_DEMONYMS = """italian italiano italiana italien italienne italienisch italiener italienerin
    french francese français française franzose französin francés francesa
    german tedesco tedesca allemand allemande deutscher deutsche alemán alemana
    spanish spagnolo spagnola espagnol espagnole spanier spanierin español española
    english inglese anglais anglaise engländer engländerin inglés inglesa british
    portuguese portoghese portugais portugaise portugiese portugiesin portugués portuguesa
    portugaises portuguese dutch olandese néerlandais néerlandaise niederländer holandés
    belgian belga belge belgier belgierin swiss svizzero svizzera suisse schweizer schweizerin
    suizo suiza austrian austriaco austriaca autrichien autrichienne österreicher
    österreicherin moroccan marocchino marocchina marocain marocaine marokkaner marroquí
    algerian algerino algérien algérienne tunisian tunisino tunisien tunisienne turkish turco
    turca turc turque türke türkin polish polacco polacca polonais polonaise pole polin polaco
    polaca romanian rumeno rumena roumain roumaine rumäne rumänin rumano rumana greek greco
    greca grec grecque grieche griechin griego griega irish irlandese irlandais irlandaise
    ire irin irlandés irlandesa american americano americana américain américaine
    amerikaner amerikanerin mexican messicano mexicain mexicaine mexikaner mexicano mexicana
    argentinian argentino argentina argentin argentine chilean cileno chilien chilienne
    chilene chileno chilena peruvian peruviano péruvien péruvienne peruaner peruano peruana
    colombian colombiano colombien colombienne kolumbianer colombiana brazilian brasiliano
    brésilien brésilienne brasilianer brasileño brasileña uruguayan uruguaiano uruguayo
    uruguaya venezuelan venezuelano venezolano venezolana cuban cubano cubana cubain
    ukrainian ucraino ukrainien ukrainienne ukrainer ucraniano ucraniana russian russo russa
    russe russin ruso rusa chinese cinese chinois chinoise chinese chinesin chino china
    japanese giapponese japonais japonaise japaner japanerin japonés japonesa indian indiano
    indien indienne inder inderin indio senegalese sénégalais sénégalaise nigerian nigeriano
    swedish svedese suédois suédoise schwede schwedin sueco sueca norwegian norvegese
    norvégien norvégienne norweger norwegerin noruego noruega danish danese danois danoise
    däne dänin danés danesa finnish finlandese finlandais finne finnin finlandés scottish
    scozzese écossais écossaise schotte schottin escocés welsh gallese gallois canadian
    canadese canadien canadienne kanadier canadiense australian australiano australien
    australienne australier vietnamese vietnamita vietnamien vietnamienne korean coreano
    coréen coréenne koreaner bosnian bosniaco bosnien serbian serbo serbe serbe serbo
    croatian croato croate kroate croata albanian albanese albanais albaner albanés
    egyptian egiziano égyptien ägypter egipcio lebanese libanese libanais libanese libanés
    syrian siriano syrien syrer sirio iranian iraniano iranien iraner iraní filipino"""
DEMONYMS = frozenset(_DEMONYMS.split())


def is_demonym(word: str) -> bool:
    return word.casefold() in DEMONYMS


_LANGUAGE_NAMES = """english italian french german spanish portuguese dutch swedish norwegian
    danish finnish polish czech russian ukrainian greek turkish arabic hebrew hindi chinese
    mandarin cantonese japanese korean catalan basque galician romanian hungarian
    inglese italiano francese tedesco spagnolo portoghese olandese russo cinese giapponese
    arabo anglais italien français allemand espagnol portugais néerlandais russe chinois
    japonais arabe englisch italienisch französisch deutsch spanisch portugiesisch
    niederländisch russisch chinesisch japanisch arabisch inglés italiano francés alemán
    español portugués holandés ruso chino japonés árabe castellano catalán gallego euskera
    polnisch türkisch griechisch schwedisch rumänisch ukrainisch kroatisch serbisch
    polacco polonais polaco turco turc turque rumeno roumain rumano greco grec griego
    catalano catalan ucraino ukrainien ucraniano coreano coréen koreanisch hindi urdu
    swahili tagalog vietnamita vietnamien vietnamesisch svedese suédois sueco farsi persian
    bengali punjabi"""
LANGUAGE_NAMES = frozenset(_LANGUAGE_NAMES.split())


def languages_named(words: list[str]) -> list[str]:
    """The names of languages among `words`, as written."""
    return [word for word in words if word.casefold() in LANGUAGE_NAMES]
