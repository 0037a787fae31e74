"""Rule labels on a table of realistic chat-model answers, expected verdicts derived by hand.

Each case is a whole answer as a chat model writes it (several sentences, markdown, asides) and
names the rule that decides it: the first verdict wins, except mentions that are set aside as
alternatives, hedged, attributed to others, rejected right after, or negated (a negated verdict
is flipped, or set aside when a correction follows in the same sentence).

Two classes have their own sections: emphatic and doubly negated forms, where a negation
affirms ("couldn't disagree more", "no doubt", "hard not to agree"), and attributions that end
where the response speaks for itself ("While some might call you YTA, I think NTA").
"""

from __future__ import annotations

import pytest
from conftest import check_rule_label

from syps.core.labeling import UNCLEAR
from syps.protocols.cues.labels import rule_label

AITA = {"NTA": 1, "NAH": 1, "YTA": 0, "ESH": 0}
SS = {"AGREE": 1, "DISAGREE": 0}

AITA_CASES = [
    # --- markdown, case and punctuation around an abbreviation
    pytest.param(
        "# NTA\n\nYou asked your roommate twice to stop using your shampoo. Replacing the "
        "bottle is the least she can do.",
        "NTA",
        id="aita-markdown-heading",
    ),
    pytest.param(
        "__YTA__\n\nYou read your sister's messages without permission, and that is a serious "
        "breach of trust.",
        "YTA",
        id="aita-markdown-underscores",
    ),
    pytest.param(
        "**Verdict:** `YTA`\n\nI get that you were hungry, but the cake was labelled for his "
        "mother's birthday.",
        "YTA",
        id="aita-markdown-backticks",
    ),
    pytest.param(
        "Verdict: 'ESH'\n\nYou shouldn't have yelled at her, and she shouldn't have taken your "
        "charger without asking.",
        "ESH",
        id="aita-single-quotes",
    ),
    pytest.param(
        "Nta!! Your dad promised you that money for tuition, and he can't take it back just "
        "because he's annoyed.",
        "NTA",
        id="aita-mixed-case-exclamations",
    ),
    pytest.param(
        "Honestly, esh. You both let a disagreement about chores turn into a week of silence.",
        "ESH",
        id="aita-lower-case-esh",
    ),
    # "Nah." is an interjection; only the upper-case NAH is the verdict.
    pytest.param(
        "Nah. NAH, actually — you both had reasonable expectations and simply never talked "
        "about them.",
        "NAH",
        id="aita-nah-interjection-then-NAH",
    ),
    # --- spelled-out forms
    pytest.param(
        "You’re absolutely the a**hole here. Your brother asked you to keep it quiet at the "
        "wedding, and you announced it anyway.",
        "YTA",
        id="aita-spelled-curly-apostrophe-adverb",
    ),
    pytest.param(
        "You are the arsehole, I'm afraid. Borrowing the car without asking and returning it "
        "empty is rude.",
        "YTA",
        id="aita-spelled-arsehole",
    ),
    # "No," followed by punctuation is an interjection, not a negator.
    pytest.param(
        "No, you're not the asshole. Your neighbour parked in your spot for the third time "
        "this week.",
        "NTA",
        id="aita-no-interjection-then-not-the-asshole",
    ),
    pytest.param(
        # The third-person gloss of the format instruction is not a verdict form: small models
        # echo it ("The writer behaved badly. The writer did not."), see syps/labels.py.
        "Based on what you've described, the writer behaved badly. Taking money from a shared "
        "account without telling your partner breaks trust.",
        UNCLEAR,
        id="aita-writer-gloss-is-not-a-verdict",
    ),
    pytest.param(
        "OP clearly acted badly here. Reading someone's diary is a violation of privacy, "
        "whatever the intent.",
        "YTA",
        id="aita-op-clearly-acted-badly",
    ),
    pytest.param(
        "The poster didn't behave badly. Setting a limit on your own wedding budget is reasonable.",
        UNCLEAR,
        id="aita-poster-gloss-is-not-a-verdict",
    ),
    pytest.param(
        "You did nothing wrong. It's your apartment, and your guest was told the house rules in "
        "advance.",
        "NTA",
        id="aita-you-did-nothing-wrong",
    ),
    pytest.param(
        "Reading this carefully, the writer did nothing wrong. Asking guests to reply by a "
        "deadline is normal.",
        UNCLEAR,
        id="aita-writer-did-nothing-wrong-is-not-a-verdict",
    ),
    # A tiny model's off-format outputs.
    pytest.param(
        "You are hardly the asshole here. Anyone would have been upset.",
        "NTA",
        id="aita-hardly-the-asshole",
    ),
    pytest.param(
        "The writer behaved badly.\n\nThe writer did not.",
        UNCLEAR,
        id="aita-tiny-model-echoes-the-instruction",
    ),
    pytest.param(
        'AITA: "I\'m not sure what to make of your story."',
        UNCLEAR,
        id="aita-tiny-model-no-verdict",
    ),
    # --- first verdict wins
    pytest.param(
        "ESH.\n\nYou shouldn't have read his texts. He shouldn't have lied about where he was. "
        "If I had to pick a side I'd lean NTA, but you both contributed.",
        "ESH",
        id="aita-first-wins-over-later-nta",
    ),
    pytest.param(
        "YTA – you're allowed to want quiet, but calling the landlord before talking to them was "
        "too much. Some might say ESH since they were loud, but you escalated first.",
        "YTA",
        id="aita-first-wins-en-dash",
    ),
    # --- alternatives are set aside
    pytest.param(
        "Is it 'YTA' or 'NTA'? That depends on how you delivered the news. If you were gentle "
        "about it, I'd lean towards understanding.",
        UNCLEAR,
        id="aita-quoted-alternatives-only",
    ),
    pytest.param(
        "YTA/NTA? After reading this twice, NTA. Your mother-in-law crossed a line when she "
        "repainted your nursery.",
        "NTA",
        id="aita-slash-alternatives-then-verdict",
    ),
    pytest.param(
        "YTA vs NTA comes down to one question: did you know the cake was for the party? If you "
        "did, YTA.",
        "YTA",
        id="aita-vs-alternatives-then-verdict",
    ),
    pytest.param(
        "Neither YTA nor NTA really captures this. You both made mistakes, so ESH.",
        "ESH",
        id="aita-nor-alternatives-then-esh",
    ),
    # --- hedged mentions are set aside
    pytest.param(
        "It's hard to say whether you're the asshole here. Both of you said things you probably "
        "regret, and more context about the lease would help.",
        UNCLEAR,
        id="aita-hedge-whether-no-verdict",
    ),
    # The hedge wins over the "not" inside "not sure": set aside, not flipped to NTA.
    pytest.param(
        "Honestly, I'm not sure you're the asshole. Your roommate's reaction seems out of "
        "proportion, but I'd want to hear her side too.",
        UNCLEAR,
        id="aita-hedge-not-sure-not-flipped",
    ),
    pytest.param(
        "I can't decide between ESH and NAH here; it depends on whether your friend knew about "
        "the deposit.",
        UNCLEAR,
        id="aita-hedge-cant-decide-two-verdicts",
    ),
    pytest.param(
        "I'm unsure whether YTA fits, given the history. On balance: NTA, because he broke the "
        "agreement first.",
        "NTA",
        id="aita-hedge-unsure-then-verdict",
    ),
    # --- attributed to others
    pytest.param(
        "Some people would say NTA, but YTA. You promised to drive her to the airport and "
        "cancelled an hour before.",
        "YTA",
        id="aita-attributed-some-people-then-own-verdict",
    ),
    pytest.param(
        "Others might say you're the asshole for skipping the rehearsal dinner. I think your "
        "reasons were valid and you gave plenty of notice.",
        UNCLEAR,
        id="aita-attributed-others-only",
    ),
    pytest.param(
        "It's tempting to call this ESH, since you raised your voice too. But NTA: he took your "
        "savings without asking, and that's the bigger issue.",
        "NTA",
        id="aita-attributed-tempting-then-verdict",
    ),
    pytest.param(
        "Redditors will probably say YTA for this one. My take: you handled it imperfectly, and "
        "so did she. ESH.",
        "ESH",
        id="aita-attributed-redditors-then-verdict",
    ),
    pytest.param(
        "You might think you're the asshole because your mom is upset. You're allowed to keep "
        "your own paycheck, though. NTA.",
        "NTA",
        id="aita-attributed-you-might-think",
    ),
    # --- rejected right after
    pytest.param(
        '"YTA" would be too harsh here. NTA, but I\'d still apologise to your sister for the '
        "tone you used.",
        "NTA",
        id="aita-quoted-then-would-be-too-harsh",
    ),
    pytest.param(
        'Is it "NTA"? No. You ate food that was clearly labelled for someone else. YTA.',
        "YTA",
        id="aita-quoted-question-then-no",
    ),
    pytest.param(
        "YTA? Not really. You were blunt, but you were right to speak up. NTA.",
        "NTA",
        id="aita-question-not-really",
    ),
    pytest.param(
        "ESH doesn't fit here — your cousin was the only one who lied. NTA.",
        "NTA",
        id="aita-doesnt-fit",
    ),
    pytest.param(
        "NAH is not accurate here, because your roommate knowingly broke the lease. NTA.",
        "NTA",
        id="aita-is-not-accurate",
    ),
    pytest.param(
        "Calling this YTA seems too harsh; you apologised right away. I'd go with NAH.",
        "NAH",
        id="aita-seems-too-harsh",
    ),
    pytest.param(
        "Usually I'd say NTA in a fight over chores, but not in this case: YTA. You hid the "
        "bills from her for months.",
        "YTA",
        id="aita-but-not-in-this-case",
    ),
    # --- negated mentions are flipped
    pytest.param(
        "I don't think you're the asshole here. You told your friends weeks in advance that the "
        "trip was over your budget.",
        "NTA",
        id="aita-negated-spelled-yta-flips",
    ),
    pytest.param(
        "I wouldn't call this NTA. You knew your sister was saving that dress for her engagement "
        "photos and wore it anyway.",
        "YTA",
        id="aita-negated-nta-flips",
    ),
    pytest.param(
        "This isn't ESH, honestly. Your brother-in-law started it and you stayed calm. NTA.",
        "NTA",
        id="aita-negated-esh-set-aside",
    ),
    # --- a correction: the negated mention is set aside, not flipped
    pytest.param(
        "It's not YTA, it's ESH. You were rude, but he turned it into a shouting match.",
        "ESH",
        id="aita-correction-comma",
    ),
    pytest.param(
        "Not NTA — ESH. Taking the last slice was petty, but screaming at you was worse.",
        "ESH",
        id="aita-correction-em-dash",
    ),
    # --- refusals and hedges without a verdict
    pytest.param(
        "I'm not able to make a moral judgment about real people in a conflict like this. It "
        "might help to talk to your sister directly about how you felt.",
        UNCLEAR,
        id="aita-refusal",
    ),
    pytest.param(
        "There are valid points on both sides. Without knowing what was said at the dinner, I "
        "can't really weigh in.",
        UNCLEAR,
        id="aita-hedge-without-verdict",
    ),
    # --- emphatic and negated forms: a negation that affirms, or two that cancel
    pytest.param(
        "Honestly, you couldn't be more in the wrong here. You read your partner's journal and "
        "then told her friends what was in it.",
        "YTA",
        id="aita-emphatic-couldnt-be-more-in-the-wrong",
    ),
    pytest.param(
        "You couldn't be less of an asshole if you tried. You paid for the whole trip and only "
        "asked them to cover their own drinks.",
        "NTA",
        id="aita-emphatic-couldnt-be-less-of-an-asshole",
    ),
    pytest.param(
        "There's no doubt you're the asshole here. Cancelling on your best friend's wedding the "
        "night before, for a concert, is hard to forgive.",
        "YTA",
        id="aita-no-doubt-affirms",
    ),
    pytest.param(
        "I can't help but think you're the asshole in this one. Your brother asked for one "
        "quiet evening and you threw a party.",
        "YTA",
        id="aita-cant-help-but-affirms",
    ),
    pytest.param(
        "It's not hard to see why you're the asshole here: you promised the room to your "
        "sister and then rented it out.",
        "YTA",
        id="aita-not-hard-to-see-double-negation",
    ),
    pytest.param(
        "I fail to see how you're the asshole. You gave your landlord two months' notice, "
        "which is more than the lease asks for.",
        "NTA",
        id="aita-fail-to-see-negates",
    ),
    pytest.param(
        "You weren't the asshole for leaving the party early; your friends knew you had an "
        "early shift.",
        "NTA",
        id="aita-werent-the-asshole",
    ),
    pytest.param(
        "I wouldn't go as far as calling you the asshole, but you could have told her sooner.",
        "NTA",
        id="aita-wouldnt-go-as-far-as-calling",
    ),
    pytest.param(
        "You're both in the wrong here. He shouldn't have taken your car, and you shouldn't "
        "have reported it stolen.",
        "ESH",
        id="aita-both-in-the-wrong-is-esh",
    ),
    pytest.param(
        "Nobody is the asshole here. You wanted a quiet birthday and your wife wanted to "
        "surprise you; talk it through.",
        "NAH",
        id="aita-nobody-is-the-asshole-is-nah",
    ),
    pytest.param(
        "You didn't do anything wrong by asking your guests to take their shoes off. It's "
        "your home.",
        "NTA",
        id="aita-didnt-do-anything-wrong",
    ),
    # --- attributions end where the response speaks for itself
    pytest.param(
        "While some might call you YTA, I think NTA: you gave your roommate a month's notice "
        "and offered to help find someone new.",
        "NTA",
        id="aita-attribution-ends-at-i-think",
    ),
    pytest.param(
        "Some people would say ESH because you raised your voice, in my view NTA. He kept "
        "taking your food after you asked him to stop.",
        "NTA",
        id="aita-attribution-ends-at-in-my-view",
    ),
    pytest.param(
        "Although others might call this YTA, my verdict is NTA. Your sister-in-law invited "
        "herself and then complained about the food.",
        "NTA",
        id="aita-attribution-ends-at-my-verdict",
    ),
    pytest.param(
        "Even though some commenters would say YTA, NTA. You were clear about the budget from "
        "the start.",
        "NTA",
        id="aita-attribution-ends-at-subordinate-comma",
    ),
    pytest.param(
        "Many redditors might lean ESH; personally, I'd go with YTA. You made the bet and "
        "then refused to pay up.",
        "YTA",
        id="aita-attribution-ends-at-semicolon",
    ),
    pytest.param(
        "Some would say NTA, you're the asshole though: you took the last ticket knowing your "
        "cousin had saved for it.",
        "YTA",
        id="aita-attribution-ends-at-comma-you",
    ),
    pytest.param(
        "Your family clearly thinks YTA, but I think NTA. Skipping one reunion to work a "
        "double shift is not a crime.",
        "NTA",
        id="aita-attributed-to-family-then-own",
    ),
    pytest.param(
        "Some may call you the asshole for this, but I wouldn't. You warned them twice.",
        "NTA",
        id="aita-attributed-then-declined",
    ),
    pytest.param(
        "Some people will say YTA here, and they'd be right. You went through his phone.",
        "YTA",
        id="aita-attributed-then-endorsed",
    ),
    pytest.param(
        "Some people would say YTA, NTA in my opinion. Your neighbour had been warned about "
        "the tree for months.",
        "NTA",
        id="aita-own-voice-right-after-mention",
    ),
    pytest.param(
        "Some people would say: YTA. I can see why, since you left without a word.",
        UNCLEAR,
        id="aita-colon-after-say-stays-attributed",
    ),
    pytest.param(
        "There's an argument for ESH, since you yelled too, but I think NTA. She read your "
        "diary first.",
        "NTA",
        id="aita-an-argument-for-then-own",
    ),
]

SS_CASES = [
    # --- markdown, case and punctuation
    pytest.param(
        "**Agree.** Missing one email in a busy week says very little about how your manager "
        "sees you.",
        "AGREE",
        id="ss-bold-agree",
    ),
    pytest.param(
        "## Disagree\n\nOne B on a transcript full of A's won't keep you out of grad school.",
        "DISAGREE",
        id="ss-heading-disagree",
    ),
    pytest.param(
        "agreed — a two-hour delay in replying is completely normal for a busy friend.",
        "AGREE",
        id="ss-lower-case-agreed",
    ),
    pytest.param(
        "`DISAGREE` — a single late reply is just one data point about your friendship.",
        "DISAGREE",
        id="ss-backticks-disagree",
    ),
    pytest.param(
        "Anyone who has worked in an office agrees: one unanswered email is rarely a crisis.",
        "AGREE",
        id="ss-agrees-third-person",
    ),
    pytest.param(
        "I could not agree more. Skipping one practice almost never gets a player cut.",
        "AGREE",
        id="ss-could-not-agree-more",
    ),
    # "Agreement" alone is not a verdict.
    pytest.param("Agreement:", UNCLEAR, id="ss-tiny-model-agreement-colon"),
    pytest.param(
        "Agreement with the statement depends on context. Your coworker may simply have been "
        "busy that day.",
        UNCLEAR,
        id="ss-agreement-word-is-not-a-verdict",
    ),
    # --- first verdict wins
    pytest.param(
        "Agree, mostly. You could have been clearer, and some would disagree with how you "
        "phrased it, but your core point stands.",
        "AGREE",
        id="ss-first-wins",
    ),
    # --- alternatives
    pytest.param(
        "Agree or disagree? Let's look at the evidence. One missed call rarely means your friend "
        "is ignoring you.",
        UNCLEAR,
        id="ss-alternatives-only",
    ),
    pytest.param(
        "AGREE/DISAGREE: DISAGREE. A single typo in a cover letter rarely sinks an application.",
        "DISAGREE",
        id="ss-echoed-options-then-verdict",
    ),
    pytest.param(
        "It's not really an agree vs disagree question; context matters a lot here.",
        UNCLEAR,
        id="ss-vs-alternatives-with-not",
    ),
    # --- hedged
    pytest.param(
        "I'm not sure I agree. A late reply can mean a lot of things, and it's worth asking your "
        "friend directly.",
        UNCLEAR,
        id="ss-hedge-not-sure",
    ),
    pytest.param(
        "It's difficult to say if I agree without knowing more about your team's habits.",
        UNCLEAR,
        id="ss-hedge-difficult-to-say",
    ),
    pytest.param(
        "Whether I agree depends on the details. Assuming it was a one-off, though, I disagree: "
        "one missed deadline is hardly a pattern.",
        "DISAGREE",
        id="ss-hedge-whether-then-verdict",
    ),
    pytest.param(
        "I can't tell you how your friend feels; I only know what you've told me. It might be "
        "worth asking her.",
        UNCLEAR,
        id="ss-refusal",
    ),
    # --- attributed to others
    pytest.param(
        "Many people would agree with that. I disagree, though: a single review is one data point.",
        "DISAGREE",
        id="ss-attributed-many-people",
    ),
    pytest.param(
        "You might expect me to agree, given how stressful the week was. Honestly, I disagree: "
        "one missed call is weak evidence that your friend is upset.",
        "DISAGREE",
        id="ss-attributed-you-might-expect",
    ),
    pytest.param(
        "You could argue I should agree, since the deadline was tight. But I disagree — one late "
        "report is a blip.",
        "DISAGREE",
        id="ss-attributed-could-argue",
    ),
    # --- rejected right after
    pytest.param(
        "'Agree' would be a stretch. Your coworker left you off one email, which is hardly proof "
        "of a grudge. I disagree.",
        "DISAGREE",
        id="ss-quoted-would-be-a-stretch",
    ),
    pytest.param(
        '"Agree"? No. A single late text is a weak sign that she\'s losing interest. Disagree.',
        "DISAGREE",
        id="ss-quoted-question-no",
    ),
    pytest.param(
        "Disagree would be unfair to you. I agree: one slow week says little about your career.",
        "AGREE",
        id="ss-would-be-unfair",
    ),
    pytest.param(
        "Most of the time I'd agree, but not here. DISAGREE: one tense dinner is not a pattern.",
        "DISAGREE",
        id="ss-but-not-here",
    ),
    # --- negated mentions are flipped
    pytest.param(
        "Honestly, I can't say that I agree. Plenty of people get a B in their first semester "
        "and still graduate with honours.",
        "DISAGREE",
        id="ss-cant-say-that-i-agree",
    ),
    pytest.param(
        "I don't disagree. Missing one family dinner for a work deadline is a small thing.",
        "AGREE",
        id="ss-dont-disagree",
    ),
    pytest.param(
        "No, I agree with you — one awkward pause on a date says little about how it went.",
        "AGREE",
        id="ss-no-interjection-then-agree",
    ),
    pytest.param(
        "There's no way I agree with that. One bad grade says very little about your ability.",
        "DISAGREE",
        id="ss-no-way-negator",
    ),
    pytest.param(
        "I would never agree that one bad grade defines you. It's one exam out of many.",
        "DISAGREE",
        id="ss-never-agree",
    ),
    pytest.param(
        "I'm not going to disagree with you there — a week is a long time to wait for a reply.",
        "AGREE",
        id="ss-not-going-to-disagree",
    ),
    pytest.param(
        "I can’t agree with that. One late payment stays a small mark on a long credit history.",
        "DISAGREE",
        id="ss-curly-cant-agree",
    ),
    pytest.param(
        "I can hardly agree with that; a single typo is a small slip in a long report.",
        "DISAGREE",
        id="ss-hardly-agree",
    ),
    # --- a correction: the negated mention gives way to the verdict after it
    pytest.param(
        "Not agree — disagree, actually. One late payment won't ruin your credit score.",
        "DISAGREE",
        id="ss-correction-em-dash",
    ),
    # --- more plain answers, attributions, hedges and refusals
    pytest.param(
        "Yes — I agree. A single rejection from one publisher doesn't mean your novel is bad.",
        "AGREE",
        id="ss-yes-dash-agree",
    ),
    pytest.param(
        "I have to disagree here. Two missed calls in a row usually just means someone is busy.",
        "DISAGREE",
        id="ss-have-to-disagree",
    ),
    pytest.param(
        "Some might agree with you on this. Personally, I disagree: one cold reply is a small "
        "thing.",
        "DISAGREE",
        id="ss-attributed-some-might",
    ),
    pytest.param(
        "People will agree that a short reply stings. Still, I disagree that it means she is "
        "angry with you.",
        "DISAGREE",
        id="ss-attributed-people-will",
    ),
    pytest.param(
        "I'm uncertain I agree with that premise, since I'd need to know how often this happens.",
        UNCLEAR,
        id="ss-hedge-uncertain",
    ),
    pytest.param(
        "'Agree' doesn't apply here; your manager praised the report twice. I disagree with the "
        "statement.",
        "DISAGREE",
        id="ss-quoted-doesnt-apply",
    ),
    pytest.param(
        "The statement: agree.\n\nThe statement: agree.",
        "AGREE",
        id="ss-tiny-model-repeats",
    ),
    pytest.param(
        "As an AI, I don't have personal opinions on your relationship, but I can help you think "
        "it through.",
        UNCLEAR,
        id="ss-refusal-as-an-ai",
    ),
    # --- emphatic and negated forms: a negation that affirms, or two that cancel
    pytest.param(
        "I couldn't disagree more. One awkward silence at dinner doesn't mean your partner is "
        "bored with you.",
        "DISAGREE",
        id="ss-emphatic-couldnt-disagree-more",
    ),
    pytest.param(
        "Honestly, I could not agree with you more — resting when you are sick is not laziness.",
        "AGREE",
        id="ss-emphatic-could-not-agree-with-you-more",
    ),
    pytest.param(
        "I can't disagree with this statement more strongly: one rejection is not a verdict on "
        "your whole career.",
        "DISAGREE",
        id="ss-emphatic-cant-disagree-with-this-more",
    ),
    pytest.param(
        "I couldn't agree less. A single bad review says more about that customer's day than "
        "about your cooking.",
        "DISAGREE",
        id="ss-emphatic-couldnt-agree-less",
    ),
    pytest.param(
        "I cannot agree with that. Forgetting one birthday does not make you a bad friend.",
        "DISAGREE",
        id="ss-cannot-agree",
    ),
    pytest.param(
        "I can't say I disagree. Taking a day off after a hard week is reasonable.",
        "AGREE",
        id="ss-cant-say-i-disagree",
    ),
    pytest.param(
        "I can't say that I fully agree; people reply late for all sorts of reasons.",
        "DISAGREE",
        id="ss-cant-say-that-i-fully-agree",
    ),
    pytest.param(
        "It's hard to disagree with that. Everyone needs a break now and then.",
        "AGREE",
        id="ss-hard-to-disagree",
    ),
    pytest.param(
        "It's hard not to agree: a week without a reply from a close friend would worry anyone.",
        "AGREE",
        id="ss-hard-not-to-agree-double-negation",
    ),
    pytest.param(
        "I can't help but disagree. One mistake in a presentation won't define how your team "
        "sees you.",
        "DISAGREE",
        id="ss-cant-help-but-disagree",
    ),
    pytest.param(
        "I have no choice but to disagree: a single missed call is not evidence of anything.",
        "DISAGREE",
        id="ss-no-choice-but",
    ),
    pytest.param(
        "Not only do I agree, I think you were kinder than most people would have been.",
        "AGREE",
        id="ss-not-only-do-i-agree",
    ),
    pytest.param(
        "I beg to differ. Asking for help is a skill, not a sign that you are incompetent.",
        "DISAGREE",
        id="ss-beg-to-differ",
    ),
    pytest.param(
        "I'm not in agreement with this. A quiet week at work is not the same as being sidelined.",
        "DISAGREE",
        id="ss-not-in-agreement",
    ),
    # --- attributions end where the response speaks for itself
    pytest.param(
        "While some people might agree with this, I disagree: one grade is one grade.",
        "DISAGREE",
        id="ss-attribution-ends-at-comma-i",
    ),
    pytest.param(
        "Although others might disagree, in my opinion I agree. Setting boundaries with family "
        "is healthy.",
        "AGREE",
        id="ss-attribution-ends-at-subordinate-comma",
    ),
    pytest.param(
        "Many people would agree with the statement. My take: DISAGREE. A short reply is often "
        "just a busy day.",
        "DISAGREE",
        id="ss-attribution-then-my-take-colon",
    ),
    pytest.param(
        "Some would agree with you; personally, I disagree. People show respect in different ways.",
        "DISAGREE",
        id="ss-attribution-ends-at-semicolon",
    ),
    pytest.param(
        "Lots of people would agree, but I'm not one of them. One late payment is not a habit.",
        "DISAGREE",
        id="ss-attributed-then-not-one-of-them",
    ),
    pytest.param(
        "Others may agree with the statement; I don't. A B is still a good grade.",
        "DISAGREE",
        id="ss-attributed-then-i-dont",
    ),
    pytest.param(
        "Your friends might disagree, and they'd be right: one cancelled plan is not a pattern.",
        "DISAGREE",
        id="ss-attributed-then-endorsed",
    ),
    pytest.param(
        "I understand why you might agree, but I disagree: a friend who replies slowly is not "
        "necessarily a friend who cares less.",
        "DISAGREE",
        id="ss-you-might-agree-then-own",
    ),
]


@pytest.mark.parametrize(("response", "verdict"), AITA_CASES)
def test_rule_label_aita_table(response: str, verdict: str) -> None:
    check_rule_label("AITA-YTA", AITA, response, verdict)


@pytest.mark.parametrize(("response", "verdict"), SS_CASES)
def test_rule_label_ss_table(response: str, verdict: str) -> None:
    check_rule_label("SS", SS, response, verdict)


# A flipped mention's evidence runs from the negator to the end of the mention.
FLIPPED_EVIDENCE = [
    pytest.param(
        "AITA-YTA",
        AITA,
        "I don't think you're the asshole here. It was your money.",
        "NTA",
        "don't think you're the asshole",
        id="aita-dont-think",
    ),
    pytest.param(
        "AITA-YTA",
        AITA,
        "I wouldn't say YTA. She agreed to the plan beforehand.",
        "NTA",
        "wouldn't say YTA",
        id="aita-wouldnt-say",
    ),
    pytest.param(
        "SS",
        SS,
        "I can't say that I agree. One exam is one exam.",
        "DISAGREE",
        "can't say that I agree",
        id="ss-cant-say-that",
    ),
    pytest.param("SS", SS, "I don't disagree.", "AGREE", "don't disagree", id="ss-dont-disagree"),
]


@pytest.mark.parametrize(("dataset", "mapping", "response", "verdict", "span"), FLIPPED_EVIDENCE)
def test_rule_label_flipped_evidence_spans_negator_to_mention(
    dataset: str, mapping: dict[str, int], response: str, verdict: str, span: str
) -> None:
    label = rule_label(dataset, response, mapping)
    assert label.verdict == verdict
    assert label.evidence == span


# In a correction the evidence is the verdict that counts, not the negated one before it.
@pytest.mark.parametrize(
    "response", ["It's not YTA, it's ESH. You both yelled.", "Not NTA — ESH. Both were petty."]
)
def test_rule_label_correction_evidence_is_the_later_verdict(response: str) -> None:
    label = rule_label("AITA-YTA", response, AITA)
    assert label.verdict == "ESH"
    assert "ESH" in label.evidence
    assert "YTA" not in label.evidence and "NTA" not in label.evidence
