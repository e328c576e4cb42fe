"""flopcount's roofline step times against published GPU serving figures (no fitting to them):

* a 13B GPT (40 layers, 5120 wide, 40 heads) in fp16 on one A100-40GB, batch 1, context 512:
  FasterTransformer's prefill 63.17 ms and 22.0 ms per token; with TP=2, 45.45 ms and 13.5 ms
  (as quoted in kipply's "Transformer Inference Arithmetic", 2022);
* Llama-3.1-8B in bf16 on one A100-40GB, one request in vLLM: about 75 tokens/s.

    python benchmarks/published_serving.py
"""

from __future__ import annotations

from flopcount import hardware, llm, models, serving
from flopcount import runtime as rt

A100 = hardware.get("a100-40gb")


def gpt_13b():
    with rt.meta():
        return models.get("gpt3_175b", n_layer=40, n_embd=5120, n_head=40).eval().to(rt.float16)


def row(case: str, ours: float, published: float, unit: str) -> None:
    print(f"| {case} | {ours:.4g} {unit} | {published:g} {unit} | {ours / published - 1:+.1%} |")


def main() -> None:
    print("| case | flopcount (roofline) | published | error |")
    print("| --- | ---: | ---: | ---: |")
    net = llm.decoder(gpt_13b(), "float16")
    prefill = llm.profile_decoder(net, llm.Prefill(512), hardware=A100).to_dict()["roofline"]["time_to_first_token_s"]
    decode = llm.profile_decoder(net, llm.Decode(512), hardware=A100).to_dict()["roofline"]["time_per_output_token_s"]
    row("13B GPT fp16, A100-40GB: prefill of 512", prefill * 1e3, 63.17, "ms")
    row("13B GPT fp16, A100-40GB: a token at context 512", decode * 1e3, 22.0, "ms")
    two = serving.fit(net, A100, tp=2, max_tokens=512)
    row("13B GPT fp16, 2 x A100-40GB (TP=2): prefill of 512", two(512, square=512 * 512) * 1e3, 45.45, "ms")
    row("13B GPT fp16, 2 x A100-40GB (TP=2): a token at context 512", two(1, read=513) * 1e3, 13.5, "ms")
    llama = llm.profile("llama3_8b", llm.Decode(512), dtype="bfloat16", hardware=A100).to_dict()["roofline"]
    row("Llama-3.1-8B bf16, A100-40GB, one request: tokens/s at context 512", llama["tokens_per_second"], 75, "tokens/s")


if __name__ == "__main__":
    main()
