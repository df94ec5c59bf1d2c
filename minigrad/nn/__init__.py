"""Neural-network building blocks with PyTorch's names, shapes and state_dict keys."""
from minigrad.nn import init, utils
from minigrad.nn.activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from minigrad.nn.attention import MultiheadAttention
from minigrad.nn.batchnorm import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d
from minigrad.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from minigrad.nn.conv import Conv1d, Conv2d
from minigrad.nn.dropout import Dropout
from minigrad.nn.embedding import Embedding
from minigrad.nn.flatten import Flatten
from minigrad.nn.linear import Identity, Linear
from minigrad.nn.lora import (
    LoraConfig,
    LoraLinear,
    apply_lora,
    disable_adapters,
    get_peft_model,
    load_adapter,
    load_lora_state_dict,
    lora_state_dict,
    merge_lora,
    merged_state_dict,
    print_trainable_parameters,
    save_adapter,
    unload_lora,
)
from minigrad.nn.loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from minigrad.nn.module import Module
from minigrad.nn.normalization import LayerNorm, RMSNorm
from minigrad.nn.parameter import Parameter
from minigrad.nn.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from minigrad.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "Module", "Parameter", "Linear", "Identity", "Embedding", "LayerNorm", "RMSNorm", "Dropout",
    "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "ReLU", "GELU", "SiLU",
    "Tanh", "Sigmoid", "LeakyReLU",
    "Softmax", "LogSoftmax", "Flatten", "CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss",
    "BCEWithLogitsLoss", "init", "utils", "MultiheadAttention", "Transformer", "TransformerEncoder",
    "TransformerEncoderLayer", "TransformerDecoder", "TransformerDecoderLayer",
    "LoraConfig", "LoraLinear", "apply_lora", "get_peft_model", "merge_lora", "unload_lora",
    "disable_adapters", "lora_state_dict", "load_lora_state_dict", "save_adapter", "load_adapter",
    "print_trainable_parameters", "merged_state_dict",
    "Conv1d", "Conv2d", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
]
