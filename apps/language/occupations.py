"""Whether words name an occupation or a language, in the five languages: compact lexicons of
the jobs and languages people name in a chat, with the endings of job words for the rest."""

from __future__ import annotations

import re

_JOBS = {
    "en": """nurse doctor physician surgeon dentist vet veterinarian pharmacist paramedic midwife
        teacher professor lecturer tutor student researcher scientist engineer developer
        programmer coder architect designer artist painter musician singer writer author
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
        translator copywriter marketer recruiter realtor broker trader investor""",
    "it": """infermiere infermiera medico dottore dottoressa chirurgo dentista veterinario
        veterinaria farmacista ostetrica insegnante maestro maestra professore professoressa
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
        fisioterapista postino operaio operaia badante casalinga""",
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
        technicien technicienne kinésithérapeute kiné facteur ouvrier ouvrière""",
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
        erzieher erzieherin altenpfleger altenpflegerin""",
    "es": """enfermero enfermera médico médica doctor doctora cirujano cirujana dentista
        veterinario veterinaria farmacéutico farmacéutica matrona profesor profesora maestro
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
        técnica fisioterapeuta cartero obrero obrera niñera""",
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
    head = words[-1].casefold()
    if head in known or any(word.casefold() in known for word in words):
        return True
    return stated_as_job and language == "en" and bool(_JOB_ENDING.search(head))


_LANGUAGE_NAMES = """english italian french german spanish portuguese dutch swedish norwegian
    danish finnish polish czech russian ukrainian greek turkish arabic hebrew hindi chinese
    mandarin cantonese japanese korean catalan basque galician romanian hungarian
    inglese italiano francese tedesco spagnolo portoghese olandese russo cinese giapponese
    arabo anglais italien français allemand espagnol portugais néerlandais russe chinois
    japonais arabe englisch italienisch französisch deutsch spanisch portugiesisch
    niederländisch russisch chinesisch japanisch arabisch inglés italiano francés alemán
    español portugués holandés ruso chino japonés árabe castellano"""
LANGUAGE_NAMES = frozenset(_LANGUAGE_NAMES.split())


def languages_named(words: list[str]) -> list[str]:
    """The names of languages among `words`, as written."""
    return [word for word in words if word.casefold() in LANGUAGE_NAMES]
