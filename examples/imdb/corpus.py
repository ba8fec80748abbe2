"""A synthetic stand-in for IMDB: movie reviews made from word lists. NOT IMDB.

The example must run offline, with nothing downloaded, so with no ``--data``
the copier uses these reviews instead of the real ones. They are generated,
not shipped, and the same seed always gives the same corpus.

Each review is a few sentences: sentiment cues ("the acting was superb",
"what a tedious script"), some negated ("the plot wasn't clever"), between
neutral filler ("it runs 104 minutes"). Cue words are drawn with a Zipf-like
skew, so a few are common and most are rare, as in real reviews: one shard of
the training set sees only part of the lexicon, which is why averaging the
shard models helps. The label is the sign of the cues' summed polarity (a
negated cue counts against its word), and a small share of labels is flipped
as noise.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

POSITIVE = """good great excellent wonderful superb brilliant fantastic terrific outstanding marvelous
magnificent splendid delightful charming enjoyable entertaining engaging gripping riveting compelling
captivating moving touching heartfelt poignant beautiful gorgeous stunning breathtaking elegant graceful
witty clever funny hilarious amusing fresh original inventive imaginative creative inspired inspiring
uplifting powerful memorable unforgettable masterful flawless perfect polished solid impressive
remarkable exceptional extraordinary phenomenal sublime exquisite lovely sweet warm tender thoughtful
intelligent insightful profound nuanced subtle rich layered vivid lively energetic thrilling exciting
suspenseful atmospheric haunting mesmerizing hypnotic dazzling spectacular stylish sharp crisp tight
satisfying rewarding refreshing joyful likable lovable endearing believable convincing authentic
sincere genuine bold daring ambitious epic timeless classic affecting absorbing accomplished assured
beguiling bracing buoyant cathartic cinematic deft dynamic electrifying eloquent enchanting engrossing
evocative exhilarating fascinating gentle glorious gutsy heartwarming honest immersive incisive
irresistible jubilant kinetic luminous lyrical majestic mature meticulous nimble observant playful
radiant resonant ravishing rousing savvy seamless sensitive shrewd sparkling spirited stirring striking
sumptuous superlative sure-footed taut textured tremendous triumphant unpredictable virtuosic vibrant
winning wise wondrous zesty""".split()

NEGATIVE = """bad awful terrible horrible dreadful atrocious abysmal appalling lousy poor weak dull boring
tedious tiresome bland flat lifeless stale predictable cliched derivative formulaic generic forgettable
mediocre uninspired unoriginal pointless senseless mindless silly stupid dumb idiotic ridiculous absurd
laughable ludicrous preposterous incoherent confusing muddled messy sloppy clumsy awkward amateurish
cheap shoddy shallow hollow empty vapid pretentious overlong bloated sluggish plodding painful
unbearable unwatchable insufferable annoying irritating grating obnoxious unpleasant ugly hideous gross
offensive tasteless crude lame wooden stiff stilted unconvincing implausible contrived forced overwrought
melodramatic sappy mawkish saccharine tired trite hackneyed banal insipid disappointing frustrating
infuriating depressing miserable wretched pathetic worthless useless aimless anemic arid artless
bewildering bungled charmless cloying cumbersome dim dismal disjointed dopey drab dreary dubious
excruciating feeble flimsy fumbling garish glib grim haphazard heavy-handed humorless inane inept
interminable irksome jarring joyless leaden limp listless meandering monotonous mundane murky nauseating
numbing obvious overblown overcooked pallid pedestrian plodding ponderous puerile repetitive rote
shapeless shrill sloppy smug soggy sour tacky tepid thin tinny toothless turgid unfunny uneven
unfocused vacuous wearisome woeful""".split()

INTENSIFIERS = "really very truly quite utterly genuinely remarkably thoroughly".split()
ASPECTS = """acting plot story script dialogue ending direction cinematography soundtrack score pacing cast
camerawork production editing casting premise screenplay finale lead villain humor""".split()
TITLES = "film movie picture sequel remake thriller comedy drama documentary western".split()
PLACES = "paris,a small town,the desert,new york,space,the suburbs,a haunted house,london,the sea".split(",")
PEOPLE = "my sister,a friend,my parents,my kids,the whole family,a coworker,nobody".split(",")
PERSONS = "a detective,a nurse,two brothers,a young widow,a retired boxer,a teacher,a chef,a pilot".split(",")


@dataclass(frozen=True)
class Review:
    text: str
    label: int  # 1 positive, 0 negative


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _zipf_weights(n: int, skew: float) -> list[float]:
    return [1.0 / (rank + 1) ** skew for rank in range(n)]


class _Writer:
    def __init__(self, rng: random.Random, skew: float):
        self.rng = rng
        self.words = {1: sorted(set(POSITIVE)), -1: sorted(set(NEGATIVE))}
        # a fixed shuffle decides which words are common, so it does not follow the alphabet
        for ws in self.words.values():
            random.Random(len(ws)).shuffle(ws)
        self.weights = {p: _zipf_weights(len(ws), skew) for p, ws in self.words.items()}

    def word(self, polarity: int) -> str:
        return self.rng.choices(self.words[polarity], self.weights[polarity])[0]

    def cue(self, polarity: int) -> tuple[str, int]:
        """One sentence and its weight: the polarity it expresses, once per cue word."""
        r = self.rng
        negated = r.random() < 0.2
        word = self.word(-polarity if negated else polarity)
        aspect, title = r.choice(ASPECTS), r.choice(TITLES)
        if negated:
            form = r.choice([f"the {aspect} was not {word}", f"the {aspect} wasn't {word} at all",
                             f"this {title} is never {word}", f"i would not call it {word}",
                             f"the {aspect} isn't {word}"])
        else:
            intens = r.choice(INTENSIFIERS) + " " if r.random() < 0.3 else ""
            phrase = intens + word
            form = r.choice([f"the {aspect} was {phrase}", f"what {_a(word)} {word} {title}",
                             f"i found the {aspect} {phrase}", f"{_a(word)} {word} {aspect} throughout",
                             f"overall {_a(phrase)} {phrase} {title}"])
            if r.random() < 0.15:
                return f"{form} and the {r.choice(ASPECTS)} is {self.word(polarity)}", 2 * polarity
        return form, polarity

    def filler(self) -> str:
        r = self.rng
        return r.choice([
            f"i saw it with {r.choice(PEOPLE)} last {r.choice(['week', 'month', 'weekend', 'year'])}",
            f"the {r.choice(TITLES)} runs {r.randint(80, 170)} minutes",
            f"it is set in {r.choice(PLACES)}",
            f"the story follows {r.choice(PERSONS)} who moves to {r.choice(PLACES)}",
            f"it came out in {r.randint(1950, 2024)}",
            f"the {r.choice(ASPECTS)} reminded me of an older {r.choice(TITLES)}",
            f"there is a long scene in {r.choice(PLACES)}",
        ])


def generate(n: int, seed: int = 0, skew: float = 1.5, noise: float = 0.03) -> list[Review]:
    """``n`` reviews, about half positive; the same ``seed`` gives the same reviews."""
    rng = random.Random(seed)
    writer = _Writer(rng, skew)
    reviews = []
    for _ in range(n):
        leaning = rng.choice([1, -1])
        sentences, score = [], 0
        for _ in range(rng.choice([1, 3, 3, 5])):  # odd, so cues rarely tie
            # mostly on the review's side, sometimes a reservation ("the ending was weak")
            text, pol = writer.cue(leaning if rng.random() < 0.8 else -leaning)
            sentences.append(text)
            score += pol
        for _ in range(rng.randint(1, 3)):
            sentences.insert(rng.randrange(len(sentences) + 1), writer.filler())
        label = int((score if score else leaning) > 0)
        if rng.random() < noise:
            label = 1 - label
        reviews.append(Review(". ".join(sentences) + ".", label))
    return reviews


def splits(seed: int = 0, n_train: int = 5000, n_heldout: int = 2000, **kw) -> tuple[list[Review], list[Review]]:
    """The training set and the held-out set, from one stream so they never share a review by design."""
    reviews = generate(n_train + n_heldout, seed=seed, **kw)
    return reviews[:n_train], reviews[n_train:]


if __name__ == "__main__":
    for review in generate(5, seed=0):
        print(review.label, review.text)
