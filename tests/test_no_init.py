"""nn.init.no_init: models whose every weight is loaded next are built without drawing."""
import threading

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.models import GPT, RWKV7, GPTConfig, RWKV7Config


def _draw_state():
    return mg.random.default_generator().bit_generator.state


def test_no_init_draws_nothing_and_nests():
    mg.manual_seed(0)
    before = _draw_state()
    with nn.init.no_init():
        with nn.init.no_init():
            nn.Linear(8, 4)
        lin = nn.Linear(8, 4)
        t = mg.tensor(np.full((3, 3), 7.0))
        nn.init.trunc_normal_(t)
        nn.init.xavier_normal_(t)
    assert _draw_state() == before and lin.weight.shape == (4, 8)
    assert (t.data == 7.0).all()
    nn.init.normal_(t)                      # outside the block: draws again
    assert _draw_state() != before and not (t.data == 7.0).all()


def test_no_init_is_per_thread():
    t = mg.tensor(np.zeros(16))
    with nn.init.no_init():
        worker = threading.Thread(target=nn.init.uniform_, args=(t, 1.0, 2.0))
        worker.start()
        worker.join()
    assert (t.data >= 1.0).all()


def test_loaders_build_without_init_and_load_every_weight(tmp_path):
    gpt = GPT(GPTConfig(vocab_size=40, d_model=16, n_layer=2, n_head=2, tie_embeddings=False))
    gpt.save_hf(str(tmp_path / "hf"))
    rwkv = RWKV7(RWKV7Config(vocab_size=40, d_model=32, n_layer=2, head_size=16))
    before = _draw_state()
    loaded = GPT.from_hf(str(tmp_path / "hf"))
    rebuilt = RWKV7.from_state_dict(rwkv.state_dict())
    assert _draw_state() == before
    for a, b in ((gpt, loaded), (rwkv, rebuilt)):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)
