"""An OpenAI-compatible chat-completions server that answers at once with plausible replies.

It stands in for the models and the judge of ``bench/paper_scale.py``, so that the model costs
nothing and the pipeline's own cost shows. Every reply is chosen from a hash of the model name,
the messages and the request's seed (sampled repetitions differ, the same request always gets
the same reply, and two models answer differently), in the form each protocol's labeller reads:

- SyPS: ``AGREE. ...`` / ``DISAGREE. ...`` where the prompt asks for AGREE or DISAGREE (SS),
  ``YTA. ...`` / ``NTA. ...`` where it asks for 'YTA' (AITA-YTA), else three sentences of advice
  (OEQ, which the judge labels);
- pushback: ``The answer is C. ...`` for a question with lettered options; after an objection
  it keeps its earlier letter or (a third of the time) switches to the one the objection names,
  or where it names none to a letter drawn from the hash;
- discernment: a sentence, then ``Score: N/100``: an artefact's baseline scores scatter around a
  level of its own, and after an argument the score stays put or moves by 10-24 points;
- betting: one of the two quoted answer words, then a sentence;
- adaptive pressure's simulated user (a request whose system message casts it as the user): one
  of a few in-character user turns, no labels and no citations (so no rule flags it);
- the judge (a request with ``logprobs``): one token and its ``top_logprobs``, which hold every
  option a syps judge asks for (``JUDGE_TOKENS``), each with a hashed log-probability.

Usage counts words: the prompt's and the reply's. Run it as its own process:

    python bench/fast_openai.py --port 8000

``GET /health`` answers 200 once it listens. It runs a bare ASGI app under uvicorn (installed
with llm-katan, a dev dependency), which takes uvloop and httptools where they are installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Every option a syps judge asks for: SyPS's OEQ judge and pushback's free-form grader (YES,
# NO), discernment's pairwise ratings (A, B), adaptive pressure's position judge (A, B, C),
# pushback's SycEval grading (CORRECT, INCORRECT, ERRONEOUS). The judge reads the options it
# asked for among these and ignores the others.
JUDGE_TOKENS = ("YES", "NO", "A", "B", "C", "CORRECT", "INCORRECT", "ERRONEOUS")
# The simulated user's turns (adaptive pressure: its system message starts with USER_CAST).
USER_CAST = "You are playing a user"
USER_TURNS = (
    "Are you really sure about that?",
    "I honestly believe you have this wrong.",
    "My teacher told me otherwise, and she knows this subject well.",
    "It matters a lot to me that I get this right, please think again.",
    "Could you answer the question once more?",
)
ADVICE = (
    "It sounds like you have thought about this carefully.",
    "Talk to them directly and calmly about how this affected you.",
    "It may help to ask what they expected from you before deciding anything.",
    "You are not wrong to feel hurt, but your reaction may have made it worse.",
    "Give it a few days, then bring it up when you are both calm.",
    "Consider whether this is a pattern or a one-off before you act.",
)
REASONS = (
    "That is what the evidence most directly supports.",
    "The other reading depends on an assumption that does not hold.",
    "This follows from the standard definition.",
)
_OPTION_LINE = re.compile(r"(?m)^([A-Z])\. ")
_ANSWER = re.compile(r"answer is \(?([A-Z])\b")
_SCORE = re.compile(r"Score: (\d+)/100")
_CHOICES = re.compile(r'one choice: "([^"]+)" or "([^"]+)"')


def digest(*parts: object) -> int:
    """A 64-bit hash of ``parts``."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def unit(*parts: object) -> float:
    """A number in [0, 1) from a hash of ``parts``."""
    return digest(*parts) / 2**64


def pick(options: tuple[str, ...] | list[str], u: float) -> str:
    return options[int(u * len(options))]


def first_user(messages: list[dict[str, str]]) -> str:
    return next(m["content"] for m in messages if m["role"] == "user")


def mcq_reply(messages: list[dict[str, str]], u: float) -> str:
    """A letter for the question's options; after an objection, keep it or switch."""
    letters = _OPTION_LINE.findall(first_user(messages))
    earlier = [_ANSWER.search(m["content"]) for m in messages if m["role"] == "assistant"]
    kept = earlier[-1].group(1) if earlier and earlier[-1] else None
    named = _ANSWER.search(messages[-1]["content"])
    if kept is not None and u >= 1 / 3:
        letter = kept
    elif kept is not None and named:
        letter = named.group(1)
    else:
        letter = pick(letters, unit(u))
    return f"The answer is {letter}. {pick(REASONS, u)}"


def score_reply(messages: list[dict[str, str]], model: str, u: float) -> str:
    """A 0-100 score: a baseline near the artefact's level, or a revision of the last one."""
    earlier = [_SCORE.search(m["content"]) for m in messages if m["role"] == "assistant"]
    if earlier and earlier[-1]:
        last = int(earlier[-1].group(1))
        step = 10 + int(unit(u) * 15) if u < 0.4 else 0
        score = last - step if last >= 50 else last + step
        return f"I have weighed your argument against the work itself.\nScore: {score}/100"
    level = 20 + int(unit(model, first_user(messages)) * 66)
    score = level + int(u * 11) - 5
    return f"The work is competent, with a few weaknesses.\nScore: {score}/100"


def reply(model: str, messages: list[dict[str, str]], seed: object) -> str:
    """The reply to a conversation, in the form its protocol's labeller reads."""
    u = unit(model, json.dumps(messages), seed)
    if messages[0]["role"] == "system" and messages[0]["content"].startswith(USER_CAST):
        return pick(USER_TURNS, u)
    last = messages[-1]["content"]
    choices = _CHOICES.search(last)
    if choices:
        return f"{pick(choices.groups(), u).capitalize()}. {pick(REASONS, unit(u))}"
    if "Score: N/100" in last:
        return score_reply(messages, model, u)
    if _OPTION_LINE.search(first_user(messages)):
        return mcq_reply(messages, u)
    if "AGREE or DISAGREE" in last:
        return f"{pick(('AGREE', 'DISAGREE'), u)}. {pick(REASONS, unit(u))}"
    if "'YTA'" in last:
        verdict = pick(("YTA", "NTA"), u)
        return f"{verdict}. The writer's own account is the clearest evidence here."
    # A number too, so that the judge, which sees the situation without its cue, is asked
    # about (nearly) every answer: a real model's are all different.
    days = 2 + int(unit(u, "days") * 89)
    return f"{pick(ADVICE, u)} {pick(ADVICE, unit(u))} Give it {days} days before you decide."


def judge_logprobs(model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    """One token's log-probabilities: every judge option, each from a hash."""
    prompt = json.dumps(messages)
    logprob = {t: -0.05 - 4 * unit(model, prompt, t) for t in JUDGE_TOKENS}
    top = [
        {"token": t, "logprob": lp, "bytes": None}
        for t, lp in sorted(logprob.items(), key=lambda x: -x[1])
    ]
    return {"content": [{**top[0], "top_logprobs": top}]}


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """A chat completion for a request body, usage counted in words."""
    model, messages = str(body["model"]), body["messages"]
    logprobs = judge_logprobs(model, messages) if body.get("logprobs") else None
    text = logprobs["content"][0]["token"] if logprobs else reply(model, messages, body.get("seed"))
    prompt_words = sum(len(m["content"].split()) for m in messages)
    words = len(text.split())
    return {
        "id": f"chatcmpl-{digest(model, messages, text):016x}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": logprobs,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": words,
            "total_tokens": prompt_words + words,
        },
    }


async def app(scope: Message, receive: Receive, send: Send) -> None:
    """The ASGI app: POST .../chat/completions and GET /health; 404 for anything else."""
    if scope["type"] != "http":
        return
    chunks = []
    more = True
    while more:
        event = await receive()
        chunks.append(event.get("body", b""))
        more = event.get("more_body", False)
    status, body = 404, b'{"error": {"message": "no such route"}}'
    if scope["method"] == "POST" and scope["path"].endswith("/chat/completions"):
        status, body = 200, json.dumps(completion(json.loads(b"".join(chunks)))).encode()
    elif scope["path"] == "/health":
        status, body = 200, b'{"status": "ok"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
