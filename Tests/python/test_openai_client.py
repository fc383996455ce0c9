"""The real `openai` Python client against `leap-ref serve` (SmolLM2, two slots; and the
tiny LFM2-VL and LFM2-Audio fixtures with their mmproj files for images and audio)."""

import base64
import json

import jsonschema
import openai
import pytest

from conftest import IMAGES, REQUEST_TIMEOUT, SOUNDS, http


@pytest.fixture(scope="module")
def client(smol_server):
    return openai.OpenAI(base_url=smol_server.url + "/v1", api_key="test-key", timeout=REQUEST_TIMEOUT, max_retries=0)


QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}


def test_streamed_text_equals_non_streamed_at_temperature_zero(client):
    full = client.chat.completions.create(model="any", messages=QUESTION, temperature=0, max_tokens=24)
    choice = full.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert full.usage.prompt_tokens > 0 and full.usage.completion_tokens > 0
    assert full.usage.total_tokens == full.usage.prompt_tokens + full.usage.completion_tokens

    stream = client.chat.completions.create(
        model="any", messages=QUESTION, temperature=0, max_tokens=24, stream=True,
        stream_options={"include_usage": True})
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(pieces) == choice.message.content
    assert finish == choice.finish_reason
    assert usage.completion_tokens == full.usage.completion_tokens
    # The second request for the same prompt was served from a slot's prompt cache.
    assert usage.prompt_tokens_details.cached_tokens > 0


def test_same_seed_same_text(client):
    def sample():
        r = client.chat.completions.create(model="any", messages=QUESTION, temperature=0.9, seed=1234, max_tokens=16)
        return r.choices[0].message.content
    assert sample() == sample()


def test_json_schema_output_validates(client):
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 30},
            "population_millions": {"type": "integer", "minimum": 0, "maximum": 99},
            "is_capital": {"type": "boolean"},
        },
        "required": ["city", "population_millions", "is_capital"],
        "additionalProperties": False,
    }
    r = client.chat.completions.create(
        model="any", temperature=0, max_tokens=80,
        messages=[{"role": "user", "content": "Describe Paris as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}})
    assert r.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(r.choices[0].message.content), schema)


def test_json_object_is_an_object(client):
    r = client.chat.completions.create(
        model="any", temperature=0, max_tokens=60, messages=QUESTION, response_format={"type": "json_object"})
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content), dict)
    else:
        assert r.choices[0].message.content.lstrip().startswith("{")


def test_required_tool_call_validates_then_tool_result_with_choice_none(client):
    messages = [{"role": "user", "content": "What's the weather in Paris, in celsius?"}]
    r = client.chat.completions.create(
        model="any", temperature=0, max_tokens=80, messages=messages, tools=[WEATHER_TOOL], tool_choice="required")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls and all(c.type == "function" and c.function.name == "get_weather" for c in calls)
    assert len({c.id for c in calls}) == len(calls)
    for c in calls:
        jsonschema.validate(json.loads(c.function.arguments), WEATHER_TOOL["function"]["parameters"])

    # Streamed, the call arrives as delta.tool_calls with an index.
    stream = client.chat.completions.create(
        model="any", temperature=0, max_tokens=80, messages=messages, tools=[WEATHER_TOOL], tool_choice="required",
        stream=True)
    deltas, finish = [], None
    for chunk in stream:
        for c in chunk.choices:
            deltas += c.delta.tool_calls or []
            finish = c.finish_reason or finish
    assert finish == "tool_calls" and deltas and deltas[0].index == 0
    assert json.loads(deltas[0].function.arguments) == json.loads(calls[0].function.arguments)

    call = calls[0]
    followup = messages + [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call.id, "type": "function",
                         "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 18, "sky": "sunny"})},
    ]
    answer = client.chat.completions.create(
        model="any", temperature=0, max_tokens=40, messages=followup, tools=[WEATHER_TOOL], tool_choice="none")
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content
    assert answer.choices[0].finish_reason in ("stop", "length")


def test_choice_none_never_calls_even_when_sampling_hot(client):
    """tool_choice "none": the tool stays in the prompt, the call syntax cannot be written
    (its opening is masked while sampling) and no text is parsed as a call, whatever the
    sampler draws."""
    messages = [{"role": "user", "content": "Weather in Paris? Call get_weather."}]
    for seed in range(6):
        r = client.chat.completions.create(
            model="any", temperature=1.5, top_p=1.0, seed=seed, max_tokens=48, messages=messages, tools=[WEATHER_TOOL],
            tool_choice="none")
        choice = r.choices[0]
        assert choice.message.tool_calls is None, (seed, choice.message)
        assert choice.finish_reason in ("stop", "length")
        assert "<|tool_call_start|>" not in (choice.message.content or ""), (seed, choice.message.content)


def test_logprobs_and_text_completions(client):
    r = client.chat.completions.create(
        model="any", messages=QUESTION, temperature=0, max_tokens=8, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for entry in content:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].token == entry.token
    c = client.completions.create(model="any", prompt="The capital of France is", temperature=0, max_tokens=6)
    assert c.choices[0].text and c.usage.completion_tokens <= 6
    assert [m.id for m in client.models.list().data]


def test_errors(client, smol_server):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=QUESTION, n=2)
    assert "'n' must be 1" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=QUESTION, temperature=5)
    assert "temperature" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=[{"role": "wizard", "content": "x"}])
    assert "messages[0].role" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "word " * 3000}])
    assert "does not fit in the context" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(
            model="any", messages=QUESTION,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "(?=a)b"}}})
    assert "cannot be enforced" in e.value.message
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(model="any", messages=[{"role": "user", "content": "x" * (9 << 20)}])
    assert e.value.status_code == 413
    bad_key = openai.OpenAI(base_url=smol_server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.models.list()
    # Health and metrics need no key; garbage bodies get OpenAI error objects.
    assert http("GET", smol_server.url + "/health")[0] == 200
    assert http("GET", smol_server.url + "/metrics")[0] == 200
    status, _, text = http("POST", smol_server.url + "/v1/chat/completions", b"{not json",
                           headers={"Authorization": "Bearer test-key"})
    assert status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"
    status, _, text = http("POST", smol_server.url + "/v1/chat/completions", {"messages": QUESTION})
    assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"


# MARK: Images and audio


def media_client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=REQUEST_TIMEOUT, max_retries=0)


def data_url(name, media_type):
    return f"data:{media_type};base64," + base64.b64encode((IMAGES / name).read_bytes()).decode()


def image_message(url, text="Describe this picture."):
    return [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}]}]


def audio_message(data, audio_format="wav", text="Transcribe this audio."):
    return [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}, {"type": "text", "text": text}]}]


def wav_base64(name):
    return base64.b64encode((SOUNDS / name).read_bytes()).decode()


def test_an_image_data_url_reaches_the_vision_model(vision_server):
    client = media_client(vision_server)
    model = client.models.list().data[0]
    assert model.to_dict()["input_modalities"] == ["text", "image"]
    r = client.chat.completions.create(
        model="any", messages=image_message(data_url("small-40x30.png", "image/png")), temperature=0, max_tokens=8)
    # libmtmd's count for this image and text: 70 image positions, 86 in all.
    assert r.usage.prompt_tokens == 86
    assert r.usage.completion_tokens > 0
    assert r.choices[0].finish_reason in ("stop", "length")
    # A JPEG, streamed: more image positions (a bigger image), usage in the last chunk.
    stream = client.chat.completions.create(
        model="any", messages=image_message(data_url("medium-500x375.jpg", "image/jpeg")), temperature=0, max_tokens=8,
        stream=True, stream_options={"include_usage": True})
    usage = [chunk.usage for chunk in stream if chunk.usage is not None]
    assert usage and usage[0].prompt_tokens > 86 and usage[0].completion_tokens > 0


def test_input_audio_reaches_the_audio_model(audio_server):
    client = media_client(audio_server)
    assert client.models.list().data[0].to_dict()["input_modalities"] == ["text", "audio"]
    r = client.chat.completions.create(
        model="any", messages=audio_message(wav_base64("lfm2-audio-chirp-1s-16k.wav")), temperature=0, max_tokens=8)
    # libmtmd: 4 + 13 audio + 12 text positions.
    assert r.usage.prompt_tokens == 29
    assert r.usage.completion_tokens > 0


def test_bad_media_is_400_and_the_next_request_is_served(vision_server, audio_server):
    vision, audio = media_client(vision_server), media_client(audio_server)
    good_image = image_message(data_url("small-40x30.png", "image/png"))
    refusals = [
        (vision, image_message("https://example.com/cat.png"), "remote image URLs are not fetched; send a data: URL"),
        (vision, image_message("data:image/png;base64,not*base64"), "base64 is not valid"),
        (vision, image_message(data_url("big-640x600.png", "image/png")), "640x600 = 384000 pixels, over the limit of 200000"),
        (vision, audio_message(wav_base64("lfm2-audio-chirp-1s-16k.wav")), "this model does not read audio"),
        (audio, audio_message(base64.b64encode(b"ID3\x03" + bytes(400)).decode(), "mp3"), "WAV only"),
        (audio, good_image, "this model does not read images"),
    ]
    for client, messages, expected in refusals:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="any", messages=messages, max_tokens=4)
        assert e.value.status_code == 400
        error = e.value.body.get("error", e.value.body)
        assert expected in error["message"], error
        assert error["type"] == "invalid_request_error"
    # Both servers go on serving.
    r = vision.chat.completions.create(model="any", messages=good_image, temperature=0, max_tokens=4)
    assert r.usage.prompt_tokens == 86 and r.usage.completion_tokens > 0
    r = audio.chat.completions.create(
        model="any", messages=audio_message(wav_base64("lfm2-audio-chirp-1s-16k.wav")), temperature=0, max_tokens=4)
    assert r.usage.prompt_tokens == 29
