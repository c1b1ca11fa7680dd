"""`planvm serve` as OpenAI's own Python client sees it (the `openai` package, from PyPI):
models listed, a chat completion plain and streamed, and failures of the same cause with
the same code either way. Run by scripts/api-test against a service whose planner and
tools answer from the example cassette: python client.py BASE_URL TOKEN"""

import sys

import openai

base, token = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key=token, max_retries=0, timeout=120)


def fails(expected, call):
    """The error `call` raises, which must be an `expected`."""
    try:
        out = call()
        if hasattr(out, "__iter__") and not isinstance(out, (str, bytes)):
            for _ in out:
                pass
    except expected as e:
        return e
    raise AssertionError(f"expected {expected.__name__}")


def user(text):
    return [{"role": "user", "content": text}]


# Chat clients list the models before anything else.
models = client.models.list()
assert [m.id for m in models.data] == ["planrt"], models
assert client.models.retrieve("planrt").object == "model"
e = fails(openai.NotFoundError, lambda: client.models.retrieve("gpt-4o"))
assert e.code == "model_not_found", e.body

# A goal answered, plain and streamed: the same answer.
goal, rf = user("Does TiDB support SQL?"), {"lang": "Japanese"}
plain = client.chat.completions.create(model="planrt", messages=goal, response_format=rf)
answer = plain.choices[0].message.content
assert answer and plain.choices[0].finish_reason == "stop", plain
chunks = list(
    client.chat.completions.create(
        model="planrt", messages=goal, response_format=rf, stream=True,
        stream_options={"include_usage": True},
    )
)
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert streamed == answer, (streamed, answer)
assert chunks[-1].usage is not None, chunks[-1]

# A goal that cannot be answered (the cassette has no plan for it): the same code, plain
# or streamed.
lost = user("What does the cassette not know?")
e = fails(openai.UnprocessableEntityError, lambda: client.chat.completions.create(model="planrt", messages=lost))
plain_code = e.code
e = fails(openai.APIError, lambda: client.chat.completions.create(model="planrt", messages=lost, stream=True))
assert e.code == plain_code == "not_answered", (e.code, plain_code, e.body)

# Refused before any planner call: an empty goal; no token.
e = fails(openai.BadRequestError, lambda: client.chat.completions.create(model="planrt", messages=user("  ")))
assert e.code == "bad_body", e.body
anonymous = openai.OpenAI(base_url=base + "/v1", api_key="wrong", max_retries=0)
e = fails(openai.AuthenticationError, lambda: anonymous.models.list())
assert e.code == "unauthorized", e.body
print("openai client: ok")
