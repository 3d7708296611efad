"""What PyTorch's FSDP holds of the 16-bit weight copies in mixed precision, measured.

The estimate's "mixed" precision under FSDP follows FSDP's own mixed precision (docs/
architecture.md, "Training"): fp32 shards gathered in 16 bits a unit at a time. This script
runs two small Llamas (transformers, built from configs of different sizes and shapes) with
FSDP2 (``fully_shard``) on two and on three gloo ranks on the CPU, a forward under
``torch.autocast(bfloat16)``, and counts the 16-bit
copies of the weight matrices that autograd holds from the forward to the backward (the
storages of the tensors it saved, as they are once the forward is over: FSDP frees a
gathered unit by resizing its storage to nothing). Three setups:

- ``autocast``: no FSDP, fp32 weights, autocast casting them (the single-GPU "mixed");
- ``fsdp+autocast``: FSDP over fp32 weights with no FSDP precision policy, autocast casting;
- ``fsdp-mixed``: FSDP with ``MixedPrecisionPolicy(param_dtype=bfloat16)``, as accelerate
  (``FullyShardedDataParallelPlugin.set_mixed_precision``) and transformers' Trainer set it
  for bf16 training, autocast on as accelerate leaves it.

What is left in the last setup is the root unit's head: FSDP2 keeps the root's parameters
gathered from the forward to the backward (``reshard_after_forward`` is off for the root).

    python benchmarks/fsdp_weight_copies.py

Needs the measure extra (torch, transformers); no GPU.
"""

from __future__ import annotations

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CONFIGS = (
    {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "tie_word_embeddings": False,
    },
    {
        "hidden_size": 384,
        "intermediate_size": 1056,
        "num_hidden_layers": 6,
        "num_attention_heads": 6,
        "num_key_value_heads": 3,
        "vocab_size": 1536,
        "tie_word_embeddings": False,
    },
)
BATCH, SEQ = 3, 50  # 150 tokens: no activation has a weight's shape
SETUPS = ("autocast", "fsdp+autocast", "fsdp-mixed")


def _model(config: dict) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**config))


def measure(rank: int, world: int, config: dict, setup: str, port: int, results: dict) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = _model(config)
    matrices = {n: p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n}
    shapes = {tuple(p.shape) for p in matrices.values()}
    whole = sum(p.numel() for p in matrices.values()) * 2
    layer = sum(p.numel() for p in model.model.layers[0].parameters() if p.dim() == 2) * 2
    if setup != "autocast":
        policy = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
            if setup == "fsdp-mixed"
            else MixedPrecisionPolicy()
        )
        mesh = init_device_mesh("cpu", (world,))
        for block in model.model.layers:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
    saved: list[torch.Tensor] = []

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    ids = torch.randint(0, config["vocab_size"], (BATCH, SEQ))
    with (
        torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor),
        torch.autocast("cpu", dtype=torch.bfloat16),
    ):
        loss = model(input_ids=ids, labels=ids).loss
    held = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
        for t in saved
        if t.dtype == torch.bfloat16
        and (tuple(t.shape) in shapes or tuple(t.shape)[::-1] in shapes)
    }
    loss.backward()
    if rank == 0:
        results[(config["num_hidden_layers"], world, setup)] = (sum(held.values()), whole, layer)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    results = mp.Manager().dict()
    print(f"PyTorch {torch.__version__}, {BATCH} x {SEQ} tokens, bf16 autocast, figures of rank 0")
    print(f"{'model':<31}{'setup':<16}{'16-bit weight copies held to backward':>40}")
    for config, ranks in zip(CONFIGS, (2, 3), strict=True):
        for setup in SETUPS:
            world = 1 if setup == "autocast" else ranks
            mp.spawn(measure, args=(world, config, setup, _free_port(), results), nprocs=world)
            held, whole, layer = results[(config["num_hidden_layers"], world, setup)]
            model = f"{config['num_hidden_layers']} layers, hidden {config['hidden_size']}" + (
                f", {world} ranks" if world > 1 else ""
            )
            print(f"{model:<31}{setup:<16}{held:>22,} B = {held / whole:6.1%} of the model")
        print(f"  (the model's matrices in bf16 {whole:,} B; one decoder layer's {layer:,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
