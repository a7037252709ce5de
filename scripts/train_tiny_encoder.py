#!/usr/bin/python3
"""Trains the tiny keyword-spotting encoder of examples/encoder and writes its committed files (not run by CI).

    taskset -c 1 /usr/bin/python3 scripts/train_tiny_encoder.py [-o examples/encoder]

The task is one a keyword or sensor firmware has: 16 frames of a 32-bin spectrogram (a 0.5 s window), four classes
by how a tone moves over time: rising, falling, steady, or two tones alternating; plus noise, a random level and a
random start bin. The model: a fixed sinusoidal position code added to the frames (outside the encoder: the
firmware adds it in its front end, like the spectrogram itself), nn.TransformerEncoder of 2 layers
(d 32, 4 heads, feed-forward 64, GELU, post-norm), mean over frames, nn.Linear(32, 4). A few seconds of one core.
Writes, into the output directory:
  model.npz     the state_dict, with the README's numpy.savez line (the encoder's tensors and the head's)
  io.npz        input: a fixed batch of encoder inputs (float32, BATCH x 16 x 32, frames + position code);
                expected: the encoder's output for it from model.double() in eval mode (float64);
                labels, logits (float64): the classes and the head's output, for the firmware's printout
"""
import argparse
import copy
import math
import os

import numpy as np
import torch

D, HEADS, FF, LAYERS, FRAMES, CLASSES, BATCH = 32, 4, 64, 2, 16, 4, 4
NAMES = ("rising", "falling", "steady", "alternating")


def windows(gen, n):
    """n spectrogram windows (n x FRAMES x D, float32) and their classes."""
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    x = torch.zeros(n, FRAMES, D)
    t = torch.arange(FRAMES, dtype=torch.float32)
    bins = torch.arange(D, dtype=torch.float32)
    for i in range(n):
        start = float(torch.randint(4, D - 4, (1,), generator=gen))
        slope = 0.2 + 0.6 * float(torch.rand(1, generator=gen))
        c = int(labels[i])
        if c == 0:
            centre = start - slope * (FRAMES / 2) + slope * t
        elif c == 1:
            centre = start + slope * (FRAMES / 2) - slope * t
        elif c == 2:
            centre = torch.full((FRAMES,), start)
        else:
            centre = start + torch.where(t.long() % 4 < 2, torch.tensor(-4.0), torch.tensor(4.0))
        level = 0.5 + float(torch.rand(1, generator=gen))
        x[i] = level * torch.exp(-0.5 * ((bins[None, :] - centre[:, None]) / 1.5) ** 2)
    x += 0.15 * torch.randn(n, FRAMES, D, generator=gen)
    return x, labels


def position_code():
    pos = torch.arange(FRAMES, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * (-math.log(100.0) / D))
    pe = torch.zeros(FRAMES, D)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return 0.5 * pe


class Keyword(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.1, activation="gelu", batch_first=True), LAYERS)
        self.head = torch.nn.Linear(D, CLASSES)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


# The weight matrices the exporter stores in --format f16 / q8 (the rest stays float32)
MATRICES = ("in_proj_weight", "out_proj.weight", "linear1.weight", "linear2.weight")


def sensitivities(encoder, x):
    """First-order error propagation of the float64 encoder at x, per output element y_i (from one backward
    pass each): kappa_i = sum |dy_i/dp|·|p| over every parameter and input element (the change of y_i when each
    is perturbed by a relative 1), kappa_w_i the same over the weight matrices only, kappa_q8_i = sum
    |dy_i/dW_rc|·h_r over the weight matrices, h_r = max_c|W_rc| / 254 (q8 per row: |W - scale·q| <= h_r), and
    sigma_q8_i = sqrt(sum (dy_i/dW_rc·h_r)² / 3), the standard deviation of y_i's first-order change when the
    rounding errors are independent and uniform in [-h_r, h_r]."""
    params = [(n, p) for n, p in encoder.named_parameters()]
    x = x.clone().requires_grad_(True)
    y = encoder(x)
    flat = y.reshape(-1)
    kappa, kappa_w, kappa_q8, sigma_q8 = (np.zeros(flat.numel()) for _ in range(4))
    q8_step = [p.detach().abs().amax(dim=-1, keepdim=True) / 254 if n.endswith(MATRICES) else None
               for n, p in params]
    for i in range(flat.numel()):
        grads = torch.autograd.grad(flat[i], [x] + [p for _, p in params], retain_graph=True)
        gx, gp = grads[0], grads[1:]
        w = sum(float((g.abs() * p.detach().abs()).sum()) for (n, p), g in zip(params, gp) if n.endswith(MATRICES))
        rest = sum(float((g.abs() * p.detach().abs()).sum()) for (n, p), g in zip(params, gp)
                   if not n.endswith(MATRICES))
        kappa[i] = w + rest + float((gx.abs() * x.detach().abs()).sum())
        kappa_w[i] = w
        kappa_q8[i] = sum(float((g.abs() * s).sum()) for s, g in zip(q8_step, gp) if s is not None)
        sigma_q8[i] = math.sqrt(sum(float(((g * s) ** 2).sum()) for s, g in zip(q8_step, gp) if s is not None) / 3)
    shape = tuple(y.shape)
    return kappa.reshape(shape), kappa_w.reshape(shape), kappa_q8.reshape(shape), sigma_q8.reshape(shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(os.path.dirname(__file__), "..", "examples", "encoder"))
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    gen = torch.Generator().manual_seed(2)
    pe = position_code()
    model = Keyword()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(args.steps):
        x, y = windows(gen, 64)
        loss = torch.nn.functional.cross_entropy(model(x + pe), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        x, y = windows(gen, 512)
        accuracy = float((model(x + pe).argmax(1) == y).float().mean())
    print(f"trained {args.steps} steps: last batch loss {float(loss):.3f}, held-out accuracy {accuracy:.3f}")

    os.makedirs(args.output, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(args.output)
    try:  # the README's line, as written
        numpy = np
        numpy.savez("model.npz", **{k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()})
    finally:
        os.chdir(cwd)
    gen = torch.Generator().manual_seed(3)
    x, labels = windows(gen, BATCH)
    inputs = (x + pe).to(torch.float32)
    model.double()  # float32 weights and inputs are exact in float64
    with torch.no_grad():
        expected = model.encoder(inputs.double())
        logits = model.head(expected.mean(dim=1))
        # f16 weights: the same forward over the projections' and linears' binary16 values (numpy's rounding, as
        # the exporter's); biases and norms stay float32, as the exporter writes them
        rounded = copy.deepcopy(model)
        for name, p in rounded.named_parameters():
            if name.endswith(MATRICES):
                p.copy_(p.half().double())
        expected_f16 = rounded.encoder(inputs.double())
    kappa, kappa_w, kappa_q8, sigma_q8 = sensitivities(model.encoder, inputs.double())
    np.savez(os.path.join(args.output, "io.npz"), input=inputs.numpy(), expected=expected.numpy(),
             expected_f16=expected_f16.numpy(), labels=labels.numpy().astype(np.int32), logits=logits.numpy(),
             kappa=kappa.astype(np.float32), kappa_w=kappa_w.astype(np.float32),
             kappa_q8=kappa_q8.astype(np.float32), sigma_q8=sigma_q8.astype(np.float32))
    u = 2.0 ** -24
    y64 = expected.numpy()
    with torch.no_grad():
        y32 = model.float().encoder(inputs).double().numpy()
    print(f"max|y| {np.abs(y64).max():.3f}; torch float32 vs float64: max error {np.abs(y32 - y64).max():.3g}; "
          f"condition: max kappa {kappa.max():.3g} (x u = {kappa.max() * u:.3g}), weights {kappa_w.max():.3g}, "
          f"q8 weight term {kappa_q8.max():.3g} (rms estimate {sigma_q8.max():.3g})")
    for i in range(BATCH):
        print(f"window {i}: {NAMES[int(labels[i])]}, predicted {NAMES[int(logits[i].argmax())]}")
    size = sum(os.path.getsize(os.path.join(args.output, f)) for f in ("model.npz", "io.npz"))
    print(f"wrote {args.output}/model.npz and io.npz ({size} bytes)")


if __name__ == "__main__":
    main()
