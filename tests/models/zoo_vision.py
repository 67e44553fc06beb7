"""timm and torchvision models at toy sizes, registered into the model zoo
(tests/models/zoo.py) as its "vision" group, for tests/models/test_zoo_vision.py
and `benchmarks/capture_zoo.py --vision`.

torchvision does not import beside the torch the main suite runs on
(2.13.0), so these run in their own venv, .venv-vision (`make test` creates
it: torch 2.14.1, torchvision 0.29.1, timm).  Every model is built from its
constructor with random weights (pretrained=False: nothing downloads), 10
classes, widths and depths cut where the constructor takes them, on
images of 32-64 pixels, batch 2.

The "vision" group is what the test runs, chosen to cover the families in
about 5 minutes on two CPU cores with kiln's disk cache cold (each model
costs TorchDynamo's explain plus kiln's C compile: 3-20 s); the
"vision_more" group (tested=False) are further architectures, and larger
variants of tested ones, that only `benchmarks/capture_zoo.py --vision`
runs (with both groups).

    from tests.models import zoo, zoo_vision  # noqa: F401 (registers)
    zoo.names("vision"); r = zoo.compare("tv_resnet18")
"""
import functools

import torch

from tests.models.zoo import _pixels, model

NC = 10  # classes


def vision(name, tested=True):
    return model(name, group="vision" if tested else "vision_more")


def _timm(name, size=32, **kw):
    import timm

    return (timm.create_model(name, pretrained=False, num_classes=NC, **kw), *_pixels(size))


# ----------------------------------------------------------- torchvision ---

@vision("tv_resnet18")
def _():
    import torchvision

    return (torchvision.models.resnet18(num_classes=NC), *_pixels())


@vision("tv_resnext_bottleneck")
def _():
    from torchvision.models.resnet import Bottleneck, ResNet

    # resnet50's bottleneck blocks, one per stage, grouped 3x3 convolutions (resnext's)
    return (ResNet(Bottleneck, [1, 1, 1, 1], num_classes=NC, groups=4, width_per_group=8), *_pixels())


@vision("tv_mobilenet_v2")
def _():
    import torchvision

    # (expansion, channels, blocks, stride) per stage: mobilenet_v2's, one block each
    setting = [[1, 16, 1, 1], [6, 24, 1, 2], [6, 32, 1, 2], [6, 64, 1, 2], [6, 96, 1, 1], [6, 160, 1, 2],
               [6, 320, 1, 1]]
    return (torchvision.models.mobilenet_v2(num_classes=NC, width_mult=0.5, inverted_residual_setting=setting),
            *_pixels())


@vision("tv_mobilenet_v3")
def _():
    from torchvision.models.mobilenetv3 import InvertedResidualConfig, MobileNetV3

    def block(cin, kernel, expanded, cout, se, act, stride):
        return InvertedResidualConfig(cin, kernel, expanded, cout, se, act, stride, 1, width_mult=1.0)

    # mobilenet_v3_small's kinds of block (squeeze-excite or not, ReLU or hardswish, strided or not), fewer
    setting = [block(16, 3, 16, 16, True, "RE", 2), block(16, 3, 72, 24, False, "RE", 2),
               block(24, 5, 96, 40, True, "HS", 2), block(40, 5, 120, 48, True, "HS", 1),
               block(48, 5, 144, 96, True, "HS", 2)]
    return (MobileNetV3(setting, last_channel=256, num_classes=NC), *_pixels())


@vision("tv_mobilenet_v3_large", tested=False)
def _():
    import torchvision

    return (torchvision.models.mobilenet_v3_large(num_classes=NC, width_mult=0.5, reduced_tail=True), *_pixels())


@vision("tv_efficientnet_b0")
def _():
    from torchvision.models import efficientnet

    setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.5, depth_mult=0.25)
    return (efficientnet.EfficientNet(setting, dropout=0.2, num_classes=NC, last_channel=last), *_pixels())


@vision("tv_efficientnet_v2")
def _():
    from torchvision.models import efficientnet

    setting, last = efficientnet._efficientnet_conf("efficientnet_v2_s")
    for s in setting:  # one block per stage, a quarter of the channels
        s.num_layers, s.input_channels, s.out_channels = 1, max(8, s.input_channels // 4), max(8, s.out_channels // 4)
    return (efficientnet.EfficientNet(setting, dropout=0.2, num_classes=NC, last_channel=128), *_pixels())


@vision("tv_regnet_y")
def _():
    from torchvision.models.regnet import BlockParams, RegNet

    params = BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return (RegNet(params, num_classes=NC, stem_width=16), *_pixels())


@vision("tv_regnet_x", tested=False)
def _():
    from torchvision.models.regnet import BlockParams, RegNet

    params = BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8)
    return (RegNet(params, num_classes=NC, stem_width=16), *_pixels())


@vision("tv_convnext")
def _():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    blocks = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, 128, 2),
              CNBlockConfig(128, None, 1)]
    return (ConvNeXt(blocks, num_classes=NC), *_pixels())


@vision("tv_vit")
def _():
    from torchvision.models import VisionTransformer

    return (VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                              num_classes=NC), *_pixels())


@vision("tv_swin")
def _():
    from torchvision.models import SwinTransformer

    return (SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                            num_classes=NC), *_pixels())


@vision("tv_swin_v2")
def _():
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformer, SwinTransformerBlockV2

    return (SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                            num_classes=NC, block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2),
            *_pixels())


@vision("tv_maxvit")
def _():
    from torchvision.models import MaxVit

    return (MaxVit(input_size=(32, 32), stem_channels=16, partition_size=2, block_channels=[16, 32],
                   block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=NC), *_pixels())


@vision("tv_squeezenet")
def _():
    import torchvision

    return (torchvision.models.squeezenet1_1(num_classes=NC), *_pixels())


@vision("tv_shufflenet_v2")
def _():
    from torchvision.models import ShuffleNetV2

    return (ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=NC), *_pixels())


@vision("tv_densenet")
def _():
    from torchvision.models import DenseNet

    # densenet121's blocks, fewer layers and narrower
    return (DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, bn_size=2, num_classes=NC),
            *_pixels())


@vision("tv_mnasnet")
def _():
    import torchvision

    return (torchvision.models.mnasnet0_5(num_classes=NC), *_pixels())


@vision("tv_googlenet")
def _():
    from torchvision.models import GoogLeNet

    return (GoogLeNet(num_classes=NC, aux_logits=False, init_weights=True), *_pixels())


@vision("tv_inception_v3", tested=False)
def _():
    from torchvision.models import Inception3

    return (Inception3(num_classes=NC, aux_logits=False, init_weights=True), *_pixels(75))


@vision("tv_alexnet")
def _():
    import torchvision

    return (torchvision.models.alexnet(num_classes=NC), *_pixels(63))


@vision("tv_vgg")
def _():
    from torchvision.models.vgg import VGG, make_layers

    # VGG's classifier takes 512 x 7 x 7 features: a short stack of batch-normed convolutions up to 512
    return (VGG(make_layers([16, "M", 32, "M", 64, 64, "M", 512], batch_norm=True), num_classes=NC), *_pixels())


# ------------------------------------------------------------------ timm ---

# built by name, timm.create_model(arch, pretrained=False, num_classes=10, **overrides), on images of
# `size` pixels (32 unless the overrides say): (zoo name, timm's name, overrides); the ones tested, then
# the benchmark-only ones
TIMM = [
    ("timm_resnet", "resnet18d", dict(layers=[1, 1, 1, 1])),
    ("timm_test_efficientnet", "test_efficientnet", {}),
    ("timm_mobilenetv3", "mobilenetv3_small_050", dict(depth_multiplier=0.5)),
    ("timm_vit_tiny", "vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2)),
    ("timm_deit_distilled", "deit_tiny_distilled_patch16_224", dict(img_size=32, patch_size=8, depth=2)),
    ("timm_swin", "swin_tiny_patch4_window7_224",
     dict(img_size=32, window_size=4, embed_dim=16, depths=(2, 2), num_heads=(2, 4))),
    ("timm_convnext", "convnext_atto", dict(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128))),
    ("timm_regnety", "regnety_002", {}),
    ("timm_rexnet", "rexnet_100", dict(width_mult=0.5, depth_mult=0.5)),
    ("timm_levit", "levit_128s", dict(img_size=64, size=64)),
    ("timm_cait", "cait_xxs24_224", dict(img_size=32, patch_size=8, depth=2)),
    ("timm_xcit", "xcit_nano_12_p16_224", dict(img_size=32, depth=2)),
    ("timm_coat", "coat_lite_tiny", dict(img_size=32)),
    ("timm_edgenext", "edgenext_xx_small", dict(size=64)),
    ("timm_pvt_v2", "pvt_v2_b0", dict(size=64)),
    ("timm_mobilevit", "mobilevit_xxs", dict(size=64)),
    ("timm_beit", "beit_base_patch16_224", dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    ("timm_eva02", "eva02_tiny_patch14_224", dict(img_size=32, patch_size=8, depth=2)),
    ("timm_sequencer", "sequencer2d_s", dict(layers=[1, 1, 1, 1], size=64)),
    ("timm_hiera", "hiera_tiny_224", dict(img_size=64, embed_dim=32, stages=(1, 1, 1, 1), size=64)),
    ("timm_visformer", "visformer_tiny", dict(img_size=64, embed_dim=48, depth=(1, 1, 1), size=64)),
]
TIMM_MORE = [
    ("timm_seresnext", "seresnext26d_32x4d", dict(layers=[1, 1, 1, 1])),
    ("timm_efficientnet", "efficientnet_b0", {}),
    ("timm_mobilenetv4", "mobilenetv4_conv_small_035", {}),
    ("timm_regnetx", "regnetx_002", {}),
    ("timm_fastvit", "fastvit_t8", dict(size=64)),
    ("timm_repvit", "repvit_m0_9", dict(size=64)),
    ("timm_tiny_vit", "tiny_vit_5m_224", dict(size=64)),
    ("timm_efficientvit", "efficientvit_b0", dict(size=64)),
    ("timm_efficientvit_m", "efficientvit_m0", dict(img_size=64, size=64)),
    ("timm_dla", "dla46_c", {}),
    ("timm_res2net", "res2net50_26w_4s", dict(layers=[1, 1, 1, 1])),
    ("timm_nfnet", "test_nfnet", {}),
    ("timm_byobnet", "test_byobnet", {}),
    ("timm_hgnetv2", "hgnetv2_b0", {}),
    ("timm_lcnet", "lcnet_050", {}),
    ("timm_deit3", "deit3_small_patch16_224", dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2)),
    ("timm_vit_relpos", "test_vit_relpos", dict(img_size=32)),
    ("timm_maxvit", "test_maxvit", dict(img_size=32)),
    ("timm_coatnet", "test_coatnet", dict(img_size=32)),
    ("timm_mambaout", "test_mambaout", {}),
    ("timm_inception_next", "inception_next_atto", {}),
    ("timm_mobileone", "mobileone_s0", {}),
    ("timm_starnet", "starnet_s050", {}),
    ("timm_davit", "davit_tiny", dict(embed_dims=(16, 32, 64, 128), depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8),
                                      size=64)),
    ("timm_twins", "twins_svt_small", dict(img_size=64, depths=(1, 1, 1, 1), size=64)),
]
for _tested, _table in ((True, TIMM), (False, TIMM_MORE)):
    for _name, _arch, _overrides in _table:
        vision(_name, tested=_tested)(functools.partial(_timm, _arch, **_overrides))


# built from their classes, where timm's named model fixes what is cut here

@vision("timm_ghostnet")
def _():
    from timm.models.ghostnet import GhostNet

    # (kernel, expansion, channels, squeeze-excite ratio, stride) per block: ghostnet_050's stages, one block each
    cfgs = [[[3, 16, 16, 0, 1]], [[3, 48, 24, 0, 2]], [[5, 72, 40, 0.25, 2]], [[3, 240, 80, 0, 2]],
            [[3, 480, 112, 0.25, 1]], [[5, 672, 160, 0.25, 2]]]
    return (GhostNet(cfgs, num_classes=NC, width=0.5), *_pixels())


@vision("timm_mixer")
def _():
    from timm.models.mlp_mixer import MlpMixer

    return (MlpMixer(NC, img_size=32, patch_size=8, num_blocks=2, embed_dim=32), *_pixels())


@vision("timm_poolformer")
def _():
    from timm.models.metaformer import GroupNorm1, MetaFormer

    # poolformer_s12's settings, one block per stage and narrower
    return (MetaFormer(num_classes=NC, depths=(1, 1, 1, 1), dims=(16, 32, 64, 128), downsample_norm=None,
                       mlp_act=torch.nn.GELU, mlp_bias=True, norm_layers=GroupNorm1, layer_scale_init_values=1e-5,
                       res_scale_init_values=None, use_mlp_head=False), *_pixels())


@vision("timm_convmixer", tested=False)
def _():
    from timm.models.convmixer import ConvMixer

    return (ConvMixer(dim=32, depth=2, kernel_size=5, patch_size=4, num_classes=NC), *_pixels())


@vision("timm_focalnet", tested=False)
def _():
    from timm.models.focalnet import FocalNet

    return (FocalNet(num_classes=NC, embed_dim=16, depths=(1, 1, 1, 1)), *_pixels())
