"""A zoo of real model architectures at toy sizes, for comparing kiln's graph
capture with TorchDynamo's (tests/models/test_zoo.py,
benchmarks/capture_zoo.py).

Every entry of ZOO is (name, builder); a builder takes no arguments and
returns (module in eval mode, example args tuple, kwargs dict), built on the
CPU from a tiny config (hidden 32-64, 2 layers, 2-4 heads, small vocab,
sequence length 8, batch 2) under a fixed seed, with no downloads.  The
transformers models use the library's defaults (return_dict=True, its default
attention implementation: sdpa where the architecture has it), so kiln and
TorchDynamo see the same code.

    from tests.models.zoo import ZOO, build, compare
    model, args, kwargs = build("bert")
    r = compare("bert")   # kiln.explain vs torch._dynamo.explain, kiln.compile vs eager
"""
import dataclasses
import os
import time

import torch
from torch import nn

B, S = 2, 8  # batch, sequence length
V = 128  # vocabulary size of the text models
H, I, L, NH = 32, 64, 2, 4  # hidden, intermediate, layers, heads

ZOO = []  # [(name, builder)]
GROUP = {}  # name -> its group: "main" here; "vision", "vision_more": tests/models/zoo_vision.py (timm, torchvision)


def model(name, group="main"):
    """Register a builder under name in group; the registered function seeds
    the generator (0) and returns the module in eval mode."""

    def register(fn):
        def builder():
            torch.manual_seed(0)
            m, args, kwargs = fn()
            return m.eval(), args, kwargs

        builder.__name__ = builder.__qualname__ = f"build_{name}"
        assert name not in dict(ZOO), name
        ZOO.append((name, builder))
        GROUP[name] = group
        return builder

    return register


def names(group="main"):
    """The registered models of group in order (group None: all of them)."""
    return [n for n, _ in ZOO if group is None or GROUP[n] == group]


def build(name):
    """(module in eval mode, args, kwargs) for the named model."""
    return dict(ZOO)[name]()


# ---------------------------------------------------------------- inputs ---

def _ids(vocab=V, seq=S, low=0):
    return torch.randint(low, vocab, (B, seq))


def _mask(seq=S):
    m = torch.ones(B, seq, dtype=torch.long)
    m[1, -2:] = 0  # the second row is padded at the end
    return m


def _text(vocab=V, mask=True, **extra):
    kw = {"attention_mask": _mask()} if mask else {}
    kw.update(extra)
    return (_ids(vocab),), kw


def _pixels(size=32, channels=3):
    return (torch.randn(B, channels, size, size),), {}


def _hf(model_cls, config_cls, **cfg):
    import transformers

    config = getattr(transformers, config_cls)(**cfg)
    return getattr(transformers, model_cls)(config)


def _bert_like(model_cls, config_cls, **extra):
    cfg = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=I,
               max_position_embeddings=64)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


def _llama_like(model_cls, config_cls, **extra):
    cfg = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, num_key_value_heads=2,
               intermediate_size=I, max_position_embeddings=64)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


# -------------------------------------------------------------- encoders ---

@model("bert")
def _():
    return (_bert_like("BertModel", "BertConfig"), *_text())


@model("bert_mlm")
def _():
    return (_bert_like("BertForMaskedLM", "BertConfig"), *_text())


@model("bert_seqcls")
def _():
    return (_bert_like("BertForSequenceClassification", "BertConfig", num_labels=3), *_text())


@model("roberta")
def _():
    return (_bert_like("RobertaModel", "RobertaConfig", pad_token_id=1), *_text(low=2))


@model("xlm_roberta")
def _():
    return (_bert_like("XLMRobertaModel", "XLMRobertaConfig", pad_token_id=1), *_text())


@model("camembert")
def _():
    return (_bert_like("CamembertModel", "CamembertConfig", pad_token_id=1), *_text())


@model("albert")
def _():
    return (_bert_like("AlbertModel", "AlbertConfig", embedding_size=16), *_text())


@model("distilbert")
def _():
    return (_hf("DistilBertModel", "DistilBertConfig", vocab_size=V, dim=H, n_layers=L, n_heads=NH, hidden_dim=I,
                max_position_embeddings=64), *_text())


@model("electra")
def _():
    return (_bert_like("ElectraModel", "ElectraConfig", embedding_size=16), *_text())


@model("deberta")
def _():
    return (_bert_like("DebertaModel", "DebertaConfig"), *_text())


@model("deberta_v2")
def _():
    return (_bert_like("DebertaV2Model", "DebertaV2Config"), *_text())


@model("mpnet")
def _():
    return (_bert_like("MPNetModel", "MPNetConfig"), *_text(low=2))


@model("convbert")
def _():
    return (_bert_like("ConvBertModel", "ConvBertConfig", embedding_size=H), *_text())


@model("squeezebert")
def _():
    return (_bert_like("SqueezeBertModel", "SqueezeBertConfig", embedding_size=H), *_text())


@model("mobilebert")
def _():
    return (_bert_like("MobileBertModel", "MobileBertConfig", embedding_size=16, intra_bottleneck_size=16,
                       num_feedforward_networks=2), *_text())


@model("roformer")
def _():
    return (_bert_like("RoFormerModel", "RoFormerConfig", embedding_size=H), *_text())


@model("ernie")
def _():
    return (_bert_like("ErnieModel", "ErnieConfig"), *_text())


@model("megatron_bert")
def _():
    return (_bert_like("MegatronBertModel", "MegatronBertConfig"), *_text())


@model("data2vec_text")
def _():
    return (_bert_like("Data2VecTextModel", "Data2VecTextConfig", pad_token_id=1), *_text(low=2))


@model("rembert")
def _():
    return (_bert_like("RemBertModel", "RemBertConfig", input_embedding_size=16, output_embedding_size=16),
            *_text())


@model("esm")
def _():
    return (_bert_like("EsmModel", "EsmConfig", pad_token_id=1, position_embedding_type="rotary"), *_text(low=2))


@model("nystromformer")
def _():
    # num_landmarks=4 < S, the Nystrom approximation, fails eagerly with a padding mask, and with none under
    # both compilers (the mask they build does not broadcast to the landmarks): full attention here
    return (_bert_like("NystromformerModel", "NystromformerConfig", segment_means_seq_len=S, num_landmarks=S),
            *_text())


@model("modernbert")
def _():
    return (_hf("ModernBertModel", "ModernBertConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L,
                num_attention_heads=NH, intermediate_size=I, max_position_embeddings=64, local_attention=4,
                global_attn_every_n_layers=2, pad_token_id=0), *_text(low=1))


@model("funnel")
def _():
    return (_hf("FunnelModel", "FunnelConfig", vocab_size=V, block_sizes=[1, 1], d_model=H, n_head=NH, d_head=8,
                d_inner=I), *_text())


# -------------------------------------------------------------- decoders ---

@model("gpt2")
def _():
    return (_hf("GPT2Model", "GPT2Config", vocab_size=V, n_embd=H, n_layer=L, n_head=NH, n_positions=64), *_text())


@model("gpt2_lm")
def _():
    return (_hf("GPT2LMHeadModel", "GPT2Config", vocab_size=V, n_embd=H, n_layer=L, n_head=NH, n_positions=64),
            *_text())


@model("gpt_neo")
def _():
    return (_hf("GPTNeoModel", "GPTNeoConfig", vocab_size=V, hidden_size=H, num_layers=L, num_heads=NH,
                attention_types=[[["global", "local"], 1]], window_size=4, max_position_embeddings=64), *_text())


@model("gptj")
def _():
    return (_hf("GPTJModel", "GPTJConfig", vocab_size=V, n_embd=H, n_layer=L, n_head=NH, rotary_dim=4,
                n_positions=64), *_text())


@model("gpt_neox")
def _():
    return (_hf("GPTNeoXModel", "GPTNeoXConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L,
                num_attention_heads=NH, intermediate_size=I, max_position_embeddings=64), *_text())


@model("gpt_bigcode")
def _():
    return (_hf("GPTBigCodeModel", "GPTBigCodeConfig", vocab_size=V, n_embd=H, n_layer=L, n_head=NH,
                n_positions=64), *_text())


@model("codegen")
def _():
    return (_hf("CodeGenModel", "CodeGenConfig", vocab_size=V, n_embd=H, n_layer=L, n_head=NH, rotary_dim=4,
                n_positions=64, n_ctx=64), *_text())


@model("opt")
def _():
    return (_hf("OPTModel", "OPTConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
                ffn_dim=I, word_embed_proj_dim=H, max_position_embeddings=64), *_text())


@model("opt_lm")
def _():
    return (_hf("OPTForCausalLM", "OPTConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L,
                num_attention_heads=NH, ffn_dim=I, word_embed_proj_dim=H, max_position_embeddings=64), *_text())


@model("bloom")
def _():
    return (_hf("BloomModel", "BloomConfig", vocab_size=V, hidden_size=H, n_layer=L, n_head=NH), *_text())


@model("falcon")
def _():
    return (_hf("FalconModel", "FalconConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L,
                num_attention_heads=NH, max_position_embeddings=64), *_text())


@model("xglm")
def _():
    return (_hf("XGLMModel", "XGLMConfig", vocab_size=V, d_model=H, num_layers=L, attention_heads=NH, ffn_dim=I,
                max_position_embeddings=64), *_text())


@model("biogpt")
def _():
    return (_bert_like("BioGptModel", "BioGptConfig"), *_text())


@model("ctrl")
def _():
    return (_hf("CTRLModel", "CTRLConfig", vocab_size=V, n_embd=H, n_layer=L, n_head=NH, dff=I, n_positions=64),
            *_text())


@model("mpt")
def _():
    return (_hf("MptModel", "MptConfig", vocab_size=V, d_model=H, n_layers=L, n_heads=NH, max_seq_len=64), *_text())


@model("llama")
def _():
    return (_llama_like("LlamaModel", "LlamaConfig"), *_text())


@model("llama_lm")
def _():
    return (_llama_like("LlamaForCausalLM", "LlamaConfig"), *_text())


@model("mistral")
def _():
    return (_llama_like("MistralModel", "MistralConfig", sliding_window=4), *_text())


@model("mixtral")
def _():
    return (_llama_like("MixtralModel", "MixtralConfig", num_local_experts=4, num_experts_per_tok=2), *_text())


@model("gemma")
def _():
    return (_llama_like("GemmaModel", "GemmaConfig", head_dim=8), *_text())


@model("gemma2")
def _():
    return (_llama_like("Gemma2Model", "Gemma2Config", head_dim=8, sliding_window=4), *_text())


@model("gemma3_text")
def _():
    return (_llama_like("Gemma3TextModel", "Gemma3TextConfig", head_dim=8, sliding_window=4), *_text())


@model("qwen2")
def _():
    return (_llama_like("Qwen2Model", "Qwen2Config"), *_text())


@model("qwen2_lm")
def _():
    return (_llama_like("Qwen2ForCausalLM", "Qwen2Config"), *_text())


@model("qwen2_moe")
def _():
    return (_llama_like("Qwen2MoeModel", "Qwen2MoeConfig", num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=32, shared_expert_intermediate_size=32), *_text())


@model("qwen3")
def _():
    return (_llama_like("Qwen3Model", "Qwen3Config", head_dim=8), *_text())


@model("phi")
def _():
    return (_llama_like("PhiModel", "PhiConfig"), *_text())


@model("phi3")
def _():
    return (_llama_like("Phi3Model", "Phi3Config", pad_token_id=0), *_text())


@model("stablelm")
def _():
    return (_llama_like("StableLmModel", "StableLmConfig"), *_text())


@model("olmo")
def _():
    return (_llama_like("OlmoModel", "OlmoConfig", pad_token_id=0), *_text())


@model("olmo2")
def _():
    return (_llama_like("Olmo2Model", "Olmo2Config", pad_token_id=0), *_text())


@model("cohere")
def _():
    return (_llama_like("CohereModel", "CohereConfig", pad_token_id=0), *_text())


@model("starcoder2")
def _():
    return (_llama_like("Starcoder2Model", "Starcoder2Config"), *_text())


@model("granite")
def _():
    return (_llama_like("GraniteModel", "GraniteConfig"), *_text())


@model("persimmon")
def _():
    return (_hf("PersimmonModel", "PersimmonConfig", vocab_size=V, hidden_size=H, num_hidden_layers=L,
                num_attention_heads=NH, intermediate_size=I, max_position_embeddings=64), *_text())


@model("mamba")
def _():
    return (_hf("MambaModel", "MambaConfig", vocab_size=V, hidden_size=H, state_size=8, num_hidden_layers=L,
                expand=2, conv_kernel=4), *_text(mask=False))


# ------------------------------------------------------ encoder-decoders ---

def _seq2seq(extra=None):
    kw = {"attention_mask": _mask(), "decoder_input_ids": _ids()}
    kw.update(extra or {})
    return (_ids(),), kw


def _bart_like(model_cls, config_cls, **extra):
    cfg = dict(vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L, encoder_attention_heads=NH,
               decoder_attention_heads=NH, encoder_ffn_dim=I, decoder_ffn_dim=I, max_position_embeddings=64)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


def _t5_like(model_cls, config_cls, **extra):
    cfg = dict(vocab_size=V, d_model=H, d_kv=8, d_ff=I, num_layers=L, num_heads=NH, decoder_start_token_id=0)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


@model("t5")
def _():
    return (_t5_like("T5Model", "T5Config"), *_seq2seq())


@model("t5_encoder")
def _():
    return (_t5_like("T5EncoderModel", "T5Config"), *_text())


@model("t5_lm")
def _():
    return (_t5_like("T5ForConditionalGeneration", "T5Config"), *_seq2seq())


@model("mt5")
def _():
    return (_t5_like("MT5Model", "MT5Config"), *_seq2seq())


@model("umt5")
def _():
    return (_t5_like("UMT5Model", "UMT5Config"), *_seq2seq())


@model("longt5")
def _():
    return (_t5_like("LongT5Model", "LongT5Config", local_radius=2), *_seq2seq())


@model("bart")
def _():
    return (_bart_like("BartModel", "BartConfig"), *_seq2seq())


@model("bart_lm")
def _():
    return (_bart_like("BartForConditionalGeneration", "BartConfig"), *_seq2seq())


@model("mbart")
def _():
    return (_bart_like("MBartModel", "MBartConfig"), *_seq2seq())


@model("pegasus")
def _():
    return (_bart_like("PegasusModel", "PegasusConfig"), *_seq2seq())


@model("marian")
def _():
    return (_bart_like("MarianMTModel", "MarianConfig", decoder_vocab_size=V, pad_token_id=V - 1), *_seq2seq())


@model("blenderbot")
def _():
    return (_bart_like("BlenderbotModel", "BlenderbotConfig"), *_seq2seq())


@model("blenderbot_small")
def _():
    return (_bart_like("BlenderbotSmallModel", "BlenderbotSmallConfig"), *_seq2seq())


@model("m2m100")
def _():
    return (_bart_like("M2M100Model", "M2M100Config", encoder_layerdrop=0.0, decoder_layerdrop=0.0), *_seq2seq())


@model("plbart")
def _():
    return (_bart_like("PLBartModel", "PLBartConfig"), *_seq2seq())


# ---------------------------------------------------------------- vision ---

def _vit_like(model_cls, config_cls, **extra):
    cfg = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=H, num_hidden_layers=L,
               num_attention_heads=NH, intermediate_size=I)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


@model("vit")
def _():
    return (_vit_like("ViTModel", "ViTConfig"), *_pixels())


@model("vit_cls")
def _():
    return (_vit_like("ViTForImageClassification", "ViTConfig", num_labels=10), *_pixels())


@model("deit")
def _():
    return (_vit_like("DeiTModel", "DeiTConfig"), *_pixels())


@model("beit")
def _():
    return (_vit_like("BeitModel", "BeitConfig", use_relative_position_bias=True), *_pixels())


@model("data2vec_vision")
def _():
    return (_vit_like("Data2VecVisionModel", "Data2VecVisionConfig"), *_pixels())


@model("dinov2")
def _():
    return (_vit_like("Dinov2Model", "Dinov2Config"), *_pixels())


@model("yolos")
def _():
    return (_vit_like("YolosModel", "YolosConfig", image_size=[32, 32], num_detection_tokens=4), *_pixels())


@model("swin")
def _():
    return (_hf("SwinModel", "SwinConfig", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                num_heads=[2, 2], window_size=2), *_pixels())


@model("swinv2")
def _():
    return (_hf("Swinv2Model", "Swinv2Config", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                num_heads=[2, 2], window_size=2), *_pixels())


@model("convnext")
def _():
    return (_hf("ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
            *_pixels())


@model("convnextv2")
def _():
    return (_hf("ConvNextV2Model", "ConvNextV2Config", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2),
            *_pixels())


@model("resnet")
def _():
    return (_hf("ResNetModel", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                layer_type="bottleneck"), *_pixels())


@model("resnet_cls")
def _():
    return (_hf("ResNetForImageClassification", "ResNetConfig", embedding_size=16, hidden_sizes=[16, 32],
                depths=[1, 1], layer_type="basic", num_labels=10), *_pixels())


@model("regnet")
def _():
    return (_hf("RegNetModel", "RegNetConfig", embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                groups_width=8), *_pixels())


@model("bit")
def _():
    return (_hf("BitModel", "BitConfig", embedding_size=16, hidden_sizes=[32, 64], depths=[1, 1], num_groups=4),
            *_pixels())


@model("mobilevit")
def _():
    return (_hf("MobileViTModel", "MobileViTConfig", image_size=64, patch_size=2, hidden_sizes=[16, 24, 32],
                neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_attention_heads=2), *_pixels(64))


@model("mobilenet_v1")
def _():
    return (_hf("MobileNetV1Model", "MobileNetV1Config", image_size=32, depth_multiplier=0.25), *_pixels())


@model("mobilenet_v2")
def _():
    return (_hf("MobileNetV2Model", "MobileNetV2Config", image_size=32, depth_multiplier=0.25), *_pixels())


@model("efficientnet")
def _():
    return (_hf("EfficientNetModel", "EfficientNetConfig", image_size=32, width_coefficient=0.25,
                depth_coefficient=0.25, hidden_dim=320), *_pixels())


@model("poolformer")
def _():
    return (_hf("PoolFormerModel", "PoolFormerConfig", hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1]),
            *_pixels())


@model("segformer")
def _():
    return (_hf("SegformerModel", "SegformerConfig", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                hidden_sizes=[16, 32], num_attention_heads=[1, 2], patch_sizes=[7, 3], strides=[4, 2],
                mlp_ratios=[2, 2]), *_pixels())


@model("levit")
def _():
    return (_hf("LevitModel", "LevitConfig", image_size=32, hidden_sizes=[32, 48], num_attention_heads=[2, 2],
                depths=[1, 1], key_dim=[8, 8], mlp_ratio=[2, 2], attention_ratio=[2, 2],
                down_ops=[["Subsample", 8, 2, 2, 2, 2]]), *_pixels())


@model("focalnet")
def _():
    return (_hf("FocalNetModel", "FocalNetConfig", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                focal_levels=[2, 2], focal_windows=[3, 3]), *_pixels())


@model("cvt")
def _():
    return (_hf("CvtModel", "CvtConfig", embed_dim=[16, 32], num_heads=[1, 2], depth=[1, 2],
                patch_sizes=[7, 3], patch_stride=[4, 2], patch_padding=[2, 1], mlp_ratio=[2.0, 2.0],
                attention_drop_rate=[0.0, 0.0], drop_rate=[0.0, 0.0], drop_path_rate=[0.0, 0.0],
                qkv_bias=[True, True], cls_token=[False, True], qkv_projection_method=["dw_bn", "dw_bn"],
                kernel_qkv=[3, 3], padding_kv=[1, 1], stride_kv=[2, 2], padding_q=[1, 1], stride_q=[1, 1]),
            *_pixels())


# ----------------------------------------------------------------- audio ---

def _wav2vec2_like(model_cls, config_cls, **extra):
    cfg = dict(hidden_size=H, num_hidden_layers=L, num_attention_heads=NH, intermediate_size=I,
               conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=8,
               num_conv_pos_embedding_groups=2)
    cfg.update(extra)
    return _hf(model_cls, config_cls, **cfg)


def _wave():
    return (torch.randn(B, 800),), {}


@model("wav2vec2")
def _():
    return (_wav2vec2_like("Wav2Vec2Model", "Wav2Vec2Config"), *_wave())


@model("hubert")
def _():
    return (_wav2vec2_like("HubertModel", "HubertConfig"), *_wave())


@model("wavlm")
def _():
    return (_wav2vec2_like("WavLMModel", "WavLMConfig", num_buckets=16, max_bucket_distance=32), *_wave())


@model("data2vec_audio")
def _():
    return (_wav2vec2_like("Data2VecAudioModel", "Data2VecAudioConfig", num_conv_pos_embeddings=4,
                           conv_pos_kernel_size=3), *_wave())


@model("unispeech")
def _():
    return (_wav2vec2_like("UniSpeechModel", "UniSpeechConfig"), *_wave())


@model("sew")
def _():
    return (_wav2vec2_like("SEWModel", "SEWConfig", squeeze_factor=2), *_wave())


def _whisper(model_cls):
    return _hf(model_cls, "WhisperConfig", vocab_size=V, d_model=H, encoder_layers=L, decoder_layers=L,
               encoder_attention_heads=NH, decoder_attention_heads=NH, encoder_ffn_dim=I, decoder_ffn_dim=I,
               num_mel_bins=16, max_source_positions=8, max_target_positions=32, pad_token_id=0,
               decoder_start_token_id=1)


@model("whisper_encoder")
def _():
    m = _whisper("WhisperModel").get_encoder()
    return m, (torch.randn(B, 16, 16),), {}


@model("whisper")
def _():
    return _whisper("WhisperModel"), (torch.randn(B, 16, 16),), {"decoder_input_ids": _ids()}


@model("ast")
def _():
    return (_hf("ASTModel", "ASTConfig", hidden_size=H, num_hidden_layers=L, num_attention_heads=NH,
                intermediate_size=I, patch_size=8, frequency_stride=8, time_stride=8, num_mel_bins=16,
                max_length=32), (torch.randn(B, 32, 16),), {})


# ------------------------------------------------------------ multimodal ---

_CLIP_TEXT = dict(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
                  max_position_embeddings=16)
_CLIP_VISION = dict(hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=NH,
                    image_size=32, patch_size=8)


@model("clip_text")
def _():
    return _hf("CLIPTextModel", "CLIPTextConfig", **_CLIP_TEXT), *_text()


@model("clip_vision")
def _():
    return _hf("CLIPVisionModel", "CLIPVisionConfig", **_CLIP_VISION), *_pixels()


@model("clip")
def _():
    import transformers

    cfg = transformers.CLIPConfig(text_config=_CLIP_TEXT, vision_config=_CLIP_VISION, projection_dim=16)
    return (transformers.CLIPModel(cfg), (_ids(),),
            {"pixel_values": torch.randn(B, 3, 32, 32), "attention_mask": _mask()})


@model("siglip_text")
def _():
    return _hf("SiglipTextModel", "SiglipTextConfig", **_CLIP_TEXT), *_text(mask=False)


@model("siglip_vision")
def _():
    return _hf("SiglipVisionModel", "SiglipVisionConfig", **_CLIP_VISION), *_pixels()


@model("groupvit_text")
def _():
    return _hf("GroupViTTextModel", "GroupViTTextConfig", **_CLIP_TEXT), *_text()


@model("owlvit_vision")
def _():
    return _hf("OwlViTVisionModel", "OwlViTVisionConfig", **_CLIP_VISION), *_pixels()


# --------------------------------------------------------- torch.nn's own ---

@model("nn_mlp")
def _():
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.SiLU(), nn.Dropout(0.1),
                      nn.Linear(64, 10), nn.LayerNorm(10))
    return m, (torch.randn(B, 32),), {}


@model("nn_cnn")
def _():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 16, 3, padding=1, groups=2), nn.BatchNorm2d(16), nn.Hardswish(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    return m, (torch.randn(B, 3, 16, 16),), {}


@model("nn_transformer_encoder")
def _():
    layer = nn.TransformerEncoderLayer(d_model=H, nhead=NH, dim_feedforward=I, batch_first=True)
    m = nn.TransformerEncoder(layer, num_layers=L, enable_nested_tensor=False)
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, -2:] = True
    return m, (torch.randn(B, S, H),), {"src_key_padding_mask": pad}


@model("nn_transformer_encoder_norm_first")
def _():
    layer = nn.TransformerEncoderLayer(d_model=H, nhead=NH, dim_feedforward=I, batch_first=True, norm_first=True,
                                       activation="gelu")
    m = nn.TransformerEncoder(layer, num_layers=L, enable_nested_tensor=False)
    return m, (torch.randn(B, S, H),), {}


@model("nn_transformer")
def _():
    m = nn.Transformer(d_model=H, nhead=NH, num_encoder_layers=L, num_decoder_layers=L, dim_feedforward=I,
                       batch_first=True)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(S)
    return m, (torch.randn(B, S, H), torch.randn(B, S, H)), {"tgt_mask": tgt_mask}


@model("nn_multihead_attention")
def _():
    m = nn.MultiheadAttention(H, NH, batch_first=True)
    x = torch.randn(B, S, H)
    return m, (x, x, x), {"need_weights": False}


# ------------------------------------------------------------ comparing ---

def flatten(out):
    """The leaves of a model's output, in order: tensors, and plain Python
    values for what is not a tensor.  ModelOutput (an OrderedDict), tuples,
    lists and dicts are walked; a transformers Cache gives its layers' keys
    and values."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):  # ModelOutput included
        return [x for k in out for x in flatten(out[k])]
    if isinstance(out, (tuple, list)):
        return [x for v in out for x in flatten(v)]
    layers = getattr(out, "layers", None)
    if isinstance(layers, (list, tuple)):  # transformers.Cache
        return [x for layer in layers for x in flatten([getattr(layer, "keys", None), getattr(layer, "values", None)])]
    if out is None or isinstance(out, (bool, int, float, str)):
        return [out]
    return [type(out).__name__]


def assert_same(out, ref, rtol=1e-4, atol=1e-4):
    """Raise AssertionError unless out's leaves match ref's (tensors with
    torch.testing.assert_close)."""
    a, b = flatten(out), flatten(ref)
    assert len(a) == len(b), f"{len(a)} output leaves, eager has {len(b)}"
    for i, (x, y) in enumerate(zip(a, b)):
        if isinstance(y, torch.Tensor):
            assert isinstance(x, torch.Tensor), f"leaf {i}: {type(x).__name__}, eager has a tensor"
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol, msg=lambda m: f"leaf {i}: {m}")
        else:
            assert x == y, f"leaf {i}: {x!r}, eager has {y!r}"


@dataclasses.dataclass
class Result:
    name: str
    kiln_graphs: int = None
    kiln_breaks: int = None
    kiln_reasons: list = dataclasses.field(default_factory=list)  # kiln.GraphBreak
    dynamo_graphs: int = None
    dynamo_breaks: int = None
    dynamo_reasons: list = dataclasses.field(default_factory=list)  # str
    equal: bool = None  # kiln.compile's output (two calls) matches eager's
    mismatch: str = ""  # why not
    dynamo_equal: bool = None  # where kiln's is not: torch.compile(backend="eager")'s output matches eager's
    error: str = ""  # the first exception, where catch=True
    seconds: float = 0.0
    dynamo_from: str = ""  # "live" (torch._dynamo.explain ran) or "reference" (DYNAMO_REFERENCE's entry)
    dynamo_stale: str = ""  # a live run that disagrees with the reference's entry: what each says

    def first_reasons(self, n=3):
        return "; ".join(f"{b.reason} ({os.path.basename(b.filename)}:{b.lineno})" for b in self.kiln_reasons[:n])


# TorchDynamo's explain of each model, as a live run gave it (graphs, breaks,
# its first reasons), per torch / transformers / Python version: it is most of
# the zoo's time (~1.5 s a model against kiln's ~0.2), and it does not change
# unless one of the three does.  compare() reads a model's entry where its
# key is there and runs TorchDynamo live for a third of the models on each
# Python (which third turns with Python's minor version: 3.11, 3.12, 3.13
# together cover the zoo), and a live run that disagrees with the entry
# makes the test fail (Result.dynamo_stale): an entry is checked at every
# `make test`, never trusted blindly.  Write a version's entries with
#     python -m tests.models.zoo --write-dynamo-reference
# (KILN_ZOO_DYNAMO=live runs TorchDynamo for every model instead.)
DYNAMO_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamo_reference.json")
_reference_cache = {}


def reference_key():
    """The versions an entry of DYNAMO_REFERENCE holds for."""
    import sys

    try:
        import transformers
        tf = transformers.__version__
    except ImportError:
        tf = "none"
    return f"torch {torch.__version__} / transformers {tf} / Python {sys.version_info[0]}.{sys.version_info[1]}"


def _reference():
    """This version's entries of DYNAMO_REFERENCE ({} if none)."""
    key = reference_key()
    if key not in _reference_cache:
        import json

        try:
            with open(DYNAMO_REFERENCE) as f:
                _reference_cache[key] = json.load(f).get(key, {})
        except FileNotFoundError:
            _reference_cache[key] = {}
    return _reference_cache[key]


def dynamo_live(name):
    """Does compare() run TorchDynamo's explain on this model (else it reads
    the reference's entry)?  Where the reference has no entry, where
    KILN_ZOO_DYNAMO=live, and for every third model of the zoo, the third
    chosen by Python's minor version."""
    import sys

    if os.environ.get("KILN_ZOO_DYNAMO") == "live" or name not in _reference():
        return True
    order = [n for n, _ in ZOO]
    return order.index(name) % 3 == sys.version_info[1] % 3


def _dynamo_entry(r):
    return [r.dynamo_graphs, r.dynamo_breaks, [str(x).splitlines()[0][:200] for x in r.dynamo_reasons[:3]]]


def write_reference(names):
    """Run TorchDynamo's explain on the named models and write their entries
    under this version's key of DYNAMO_REFERENCE (other keys kept)."""
    import json

    try:
        with open(DYNAMO_REFERENCE) as f:
            data = json.load(f)
    except FileNotFoundError:
        data = {}
    entries = data.setdefault(reference_key(), {})
    for name in names:
        r = Result(name)
        m, args, kwargs = build(name)
        with torch.no_grad():
            _reset()
            _dynamo_explain(r, m, args, kwargs, lambda fn: fn())
            _reset()
        entries[name] = _dynamo_entry(r)
        print(f"{name}: {r.dynamo_graphs} graphs, {r.dynamo_breaks} breaks", flush=True)
    data[reference_key()] = entries
    with open(DYNAMO_REFERENCE, "w") as f:   # (a model's entry on one line)
        f.write("{\n" + ",\n".join(
            f" {json.dumps(key)}: {{\n" + ",\n".join(f"  {json.dumps(n)}: {json.dumps(e)}" for n, e in
                                                     sorted(data[key].items())) + "\n }"
            for key in sorted(data)) + "\n}\n")
    _reference_cache.clear()


def _dynamo_explain(r, m, args, kwargs, step):
    """torch._dynamo.explain of the model into r's dynamo_* fields."""
    from torch._dynamo.utils import counters

    counters.clear()
    dx = step(lambda: torch._dynamo.explain(m)(*args, **kwargs))
    if dx is not None:
        # TorchDynamo counts graph_count - 1 breaks: -1 where it records no graph at all.
        # Where it breaks and then records no graph (nn.Transformer's data-dependent
        # bool()), explain reports nothing but its counters (and its log) keep the
        # break: the larger of the two is its count
        seen = len(counters["graph_break"])
        r.dynamo_graphs, r.dynamo_breaks = dx.graph_count, max(0, dx.graph_break_count, seen)
        r.dynamo_reasons = [b.reason for b in dx.break_reasons] or \
            [k.splitlines()[0] for k in counters["graph_break"]]
    r.dynamo_from = "live"


def _reset():
    import kiln

    kiln.reset()  # kiln's caches, and TorchDynamo's
    torch._dynamo.reset()


def compare(name, backend="kiln", catch=False):
    """Run the named model eagerly, under kiln.explain(backend="eager"),
    under torch._dynamo.explain (or read its DYNAMO_REFERENCE entry: see
    dynamo_live) and under kiln.compile(backend=backend)
    (called twice), all under torch.no_grad(), and return a Result.  With
    catch=True an exception in one step is noted in Result.error and the
    remaining steps still run; else it propagates."""
    import kiln

    r = Result(name)
    t0 = time.perf_counter()

    def step(fn):
        try:
            return fn()
        except Exception as e:
            if not catch:
                raise
            r.error = r.error or f"{type(e).__name__}: {e}".splitlines()[0][:300]

    m, args, kwargs = build(name)
    with torch.no_grad():
        ref = m(*args, **kwargs)
        _reset()
        ex = step(lambda: kiln.explain(m, backend="eager")(*args, **kwargs))
        if ex is not None:
            r.kiln_graphs, r.kiln_breaks, r.kiln_reasons = ex.graph_count, ex.graph_break_count, list(ex.breaks)
        _reset()
        known = _reference().get(name)
        if dynamo_live(name):
            _dynamo_explain(r, m, args, kwargs, step)
            if known is not None and r.dynamo_breaks is not None and known[:2] != _dynamo_entry(r)[:2]:
                r.dynamo_stale = (f"{DYNAMO_REFERENCE} says {known[0]} graphs, {known[1]} breaks under "
                                  f"{reference_key()!r}; TorchDynamo now gives {r.dynamo_graphs} graphs, "
                                  f"{r.dynamo_breaks} breaks (python -m tests.models.zoo --write-dynamo-reference)")
        else:
            r.dynamo_graphs, r.dynamo_breaks, r.dynamo_reasons = known[0], known[1], list(known[2])
            r.dynamo_from = "reference"
        _reset()

        def run_compiled():
            fast = kiln.compile(m, backend=backend)
            for call in (1, 2):
                try:
                    assert_same(fast(*args, **kwargs), ref)
                except AssertionError as e:
                    r.equal, r.mismatch = False, f"call {call}: " + " ".join(str(e).split())[:300]
                    return
            r.equal = True

        step(run_compiled)
        _reset()
        if not r.equal:
            # is it kiln, or does the model compute differently under any compiler
            # (torch.compiler.is_compiling() paths)?  TorchDynamo with its eager backend
            try:
                fast = torch.compile(m, backend="eager")
                assert_same(fast(*args, **kwargs), ref)
                assert_same(fast(*args, **kwargs), ref)
                r.dynamo_equal = True
            except Exception:
                r.dynamo_equal = False
            _reset()
    r.seconds = time.perf_counter() - t0
    return r


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="the zoo's TorchDynamo reference (DYNAMO_REFERENCE)")
    ap.add_argument("--write-dynamo-reference", action="store_true",
                    help="run torch._dynamo.explain on every model of the group and write their entries "
                         "under this torch / transformers / Python version's key")
    ap.add_argument("--group", default="main")
    ap.add_argument("--models", default="", help="comma-separated names (default: the whole group)")
    opts = ap.parse_args()
    if opts.write_dynamo_reference:
        import warnings

        warnings.simplefilter("ignore")
        try:
            import transformers

            transformers.logging.set_verbosity_error()
        except ImportError:
            pass
        write_reference(opts.models.split(",") if opts.models else names(opts.group))
    else:
        ap.print_help()
