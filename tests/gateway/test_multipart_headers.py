"""A multipart part header with a control character or NUL is one clear 400, never a 500 with a traceback."""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.kit import AUTH, call, gateway_toml, serving, write
from tests.media.samples import JPEG

_MEDIA = '\n[agents.ops.media]\naccept = ["image"]\n'
_DISPOSITION = b'Content-Disposition: form-data; name="image"; filename="x.jpg"'
_HEADERS = (
    b'Content-Disposition: form-data; name="image"; filename="x\x00.jpg"',  # NUL in the filename
    b'Content-Disposition: form-data; name="im\x01age"; filename="x.jpg"',  # a control character in the name
    _DISPOSITION + b"\r\nX-Extra\x00: 1",  # NUL in a header's name
    _DISPOSITION + b"\r\nX-Extra: \x7f",  # DEL in a header's value
    b"Content-Disposition: form-data; name=\"image\"; filename*=utf-8''x%00.jpg",  # NUL once decoded
)


async def test_a_part_header_with_a_control_character_or_nul_is_400(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    errors: list[str] = []
    sink = logger.add(lambda message: errors.append(str(message)), level="ERROR", format="{message}")
    toml = gateway_toml(fake_llm.base_url).replace("temperature = 0.2", "temperature = 0.2\nvision = true") + _MEDIA
    try:
        async with serving(write(tmp_path, toml)) as (_, gw):
            headers = {**AUTH, "Content-Type": "multipart/form-data; boundary=b"}
            answers = []
            for header in _HEADERS:
                body = b"--b\r\n" + header + b"\r\nContent-Type: image/jpeg\r\n\r\n" + JPEG + b"\r\n--b--\r\n"
                status, answer, _ = await call(gw, "POST", "/api/agents/ops/messages", data=body, headers=headers)
                answers.append((status, answer["error"], answer["detail"]))
    finally:
        logger.remove(sink)
    expected = (400, "bad_request", "the multipart body is malformed: a part's header holds a control character or NUL")
    assert answers == [expected] * len(_HEADERS)
    assert errors == [] and fake_llm.requests == []
