import pytest

from textagent.templates import CHATML, FORMATS, GEMMA, LLAMA3, PLAIN, format_from_renderer, get_format


def chatml_renderer(messages):
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + "<|im_start|>assistant\n"


def gemma_renderer(messages):
    # Gemma folds the system text into the first user turn and calls the assistant "model".
    out, system = "<bos>", ""
    for m in messages:
        if m["role"] == "system":
            system = m["content"] + "\n\n"
            continue
        role = "model" if m["role"] == "assistant" else "user"
        out += f"<start_of_turn>{role}\n{system}{m['content']}<end_of_turn>\n"
        system = ""
    return out + "<start_of_turn>model\n"


@pytest.mark.parametrize("fmt", list(FORMATS.values()))
def test_follow_up_only_appends(fmt):
    first = fmt.start("SYS", "TASK")
    second = first + "REPLY" + fmt.follow_up("OBS")
    assert second.startswith(first) and second.index("SYS") < second.index("TASK") < second.index("OBS")


def test_learned_chatml_equals_builtin():
    learned = format_from_renderer(chatml_renderer)
    assert learned.start("S", "T") == CHATML.start("S", "T")
    assert learned.follow_up("O") == CHATML.follow_up("O")


def test_learned_gemma_keeps_the_server_bos_and_folds_system():
    learned = format_from_renderer(gemma_renderer)
    assert learned.start("S", "T") == "<bos>" + GEMMA.start("S", "T")
    assert learned.follow_up("O") == GEMMA.follow_up("O")


def test_rendering_with_learned_format_matches_the_template_turn_by_turn():
    learned = format_from_renderer(chatml_renderer)
    text = learned.start("S", "T") + "R" + learned.follow_up("O")
    assert text == chatml_renderer([{"role": "system", "content": "S"}, {"role": "user", "content": "T"},
                                    {"role": "assistant", "content": "R"}, {"role": "user", "content": "O"}])


def test_template_that_drops_turns_is_refused():
    with pytest.raises(ValueError, match="in order"):
        format_from_renderer(lambda messages: "only the last: " + messages[-1]["content"])


def test_get_format():
    assert get_format("ChatML") is CHATML and get_format(LLAMA3) is LLAMA3 and get_format("plain") is PLAIN
    with pytest.raises(ValueError, match="unknown chat format"):
        get_format("vicuna")
