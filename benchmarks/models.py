"""The real workloads' models, written once over a PyTorch-compatible `nn` namespace (`torch.nn`
or `dualflow.nn`: the same code, the same state-dict names), at the sizes people train them:

* `resnet18`: torchvision's ResNet-18 (7x7 stem, max-pool, [2, 2, 2, 2] BasicBlocks of width
  64-512, in-place ReLUs), 10 classes.
* `mobilenet_v2`: torchvision's MobileNetV2 at width 1.0 (inverted residuals, depthwise 3x3,
  in-place ReLU6, 1280 features), 10 classes, classifier dropout 0 (every system must compute the
  same numbers).
* `gpt`: a nanoGPT decoder (pre-LayerNorm blocks, causal scaled-dot-product attention, GELU MLP,
  LM head tied to the token embedding); logits flattened to (batch * block, vocab).
* `lstm_lm`: PyTorch's word_language_model LSTM (embedding, 2-layer LSTM, linear decoder),
  dropout 0, batch-first, logits flattened to (batch * sequence, vocab).
* `bert_mlm`: a small BERT masked LM as Hugging Face's BertForMaskedLM lays it out (word and
  position embeddings, post-LayerNorm encoder layers with separate query/key/value projections,
  GELU feed-forward, a dense-GELU-LayerNorm prediction head and a decoder tied to the word
  embeddings), dropout 0; logits flattened to (batch * sequence, vocab). Small enough that the
  per-op and per-parameter overheads, not the arithmetic, decide the step time.
"""
from __future__ import annotations

from types import SimpleNamespace

GPT_CONFIG = SimpleNamespace(n_layer=4, n_head=4, n_embd=128, block_size=64, vocab_size=65)
LSTM_CONFIG = SimpleNamespace(ntoken=10_000, ninp=200, nhid=200, nlayers=2, seq=35)
BERT_CONFIG = SimpleNamespace(vocab_size=1000, hidden=64, heads=4, layers=2, intermediate=256,
                              seq=32, layer_norm_eps=1e-12)


def _resnet18(nn, classes: int):
    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            widths, cin = (64, 128, 256, 512), 64
            for i, width in enumerate(widths):
                stride = 1 if i == 0 else 2
                setattr(self, f"layer{i + 1}", nn.Sequential(BasicBlock(cin, width, stride),
                                                             BasicBlock(width, width, 1)))
                cin = width
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet18()


def _mobilenet_v2(nn, classes: int):
    def conv_bn_relu6(cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2,
                                       groups=groups, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU6(inplace=True))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int):
            super().__init__()
            hidden = cin * expand
            self.use_res_connect = stride == 1 and cin == cout
            layers = [] if expand == 1 else [conv_bn_relu6(cin, hidden, 1)]
            layers += [conv_bn_relu6(hidden, hidden, stride=stride, groups=hidden),
                       nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res_connect else self.conv(x)

    class MobileNetV2(nn.Module):
        SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

        def __init__(self):
            super().__init__()
            cin, features = 32, [conv_bn_relu6(3, 32, stride=2)]
            for t, c, n, s in self.SETTINGS:
                for i in range(n):
                    features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            features.append(conv_bn_relu6(cin, 1280, 1))
            self.features = nn.Sequential(*features)
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(1280, classes))

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)).flatten(1))

    return MobileNetV2()


def _gpt(nn):
    F, cfg = nn.functional, GPT_CONFIG

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, cfg.n_head, c // cfg.n_head).transpose(1, 2)
                       for z in self.c_attn(x).split(cfg.n_embd, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

        def attention_flops(self, x) -> int:
            """The two (t x t) attention matmuls, beside the Linear layers counted on their own."""
            b, t, c = x.shape
            return 2 * 2 * b * t * t * c

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(),
                                     nn.Linear(4 * cfg.n_embd, cfg.n_embd))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.h = nn.ModuleList([Block() for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

        def forward(self, idx):
            x = self.wte(idx) + self.wpe.weight[:idx.shape[1]]
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x)).view(-1, cfg.vocab_size)

    return GPT()


def _lstm_lm(nn):
    cfg = LSTM_CONFIG

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(cfg.ntoken, cfg.ninp)
            self.rnn = nn.LSTM(cfg.ninp, cfg.nhid, cfg.nlayers, batch_first=True)
            self.decoder = nn.Linear(cfg.nhid, cfg.ntoken)

        def forward(self, tokens):
            output, _ = self.rnn(self.encoder(tokens))
            return self.decoder(output).view(-1, cfg.ntoken)

    return RNNModel()


def _bert_mlm(nn):
    F, cfg = nn.functional, BERT_CONFIG

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query = nn.Linear(cfg.hidden, cfg.hidden)
            self.key = nn.Linear(cfg.hidden, cfg.hidden)
            self.value = nn.Linear(cfg.hidden, cfg.hidden)
            self.dense = nn.Linear(cfg.hidden, cfg.hidden)
            self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (proj(x).view(b, t, cfg.heads, c // cfg.heads).transpose(1, 2)
                       for proj in (self.query, self.key, self.value))
            y = F.scaled_dot_product_attention(q, k, v)
            return self.norm(x + self.dense(y.transpose(1, 2).reshape(b, t, c)))

        def attention_flops(self, x) -> int:
            """The two (t x t) attention matmuls, beside the Linear layers counted on their own."""
            b, t, c = x.shape
            return 2 * 2 * b * t * t * c

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = SelfAttention()
            self.intermediate = nn.Linear(cfg.hidden, cfg.intermediate)
            self.output = nn.Linear(cfg.intermediate, cfg.hidden)
            self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

        def forward(self, x):
            x = self.attention(x)
            return self.norm(x + self.output(F.gelu(self.intermediate(x))))

    class BertMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
            self.position_embeddings = nn.Embedding(cfg.seq, cfg.hidden)
            self.embedding_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
            self.layers = nn.ModuleList([Layer() for _ in range(cfg.layers)])
            self.head_dense = nn.Linear(cfg.hidden, cfg.hidden)
            self.head_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
            self.decoder = nn.Linear(cfg.hidden, cfg.vocab_size)
            self.decoder.weight = self.word_embeddings.weight  # tied, as BERT's MLM head

        def forward(self, idx):
            x = self.word_embeddings(idx) + self.position_embeddings.weight[:idx.shape[1]]
            x = self.embedding_norm(x)
            for layer in self.layers:
                x = layer(x)
            x = self.head_norm(F.gelu(self.head_dense(x)))
            return self.decoder(x).view(-1, cfg.vocab_size)

    return BertMLM()


def build_real(nn, name: str, classes: int):
    """One of the real workloads' models, or None for another name."""
    if name == "resnet18":
        return _resnet18(nn, classes)
    if name == "mobilenet_v2":
        return _mobilenet_v2(nn, classes)
    if name == "gpt":
        return _gpt(nn)
    if name == "lstm_lm":
        return _lstm_lm(nn)
    if name == "bert_mlm":
        return _bert_mlm(nn)
    return None
