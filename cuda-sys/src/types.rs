//! Scalar typedefs, opaque handles and structs of the CUDA driver API.
//!
//! Checked against `cuda.h` of CUDA 12.9 and 13.0 by `tests/audit.rs`:
//! every alias below resolves to the same primitive or pointer as the
//! header's, every struct has the header's size, alignment and offsets, and
//! every union the header's size and alignment, with members the header
//! declares (a union may name a subset of the header's members: they are
//! alternatives, and the headers of CUDA 12.9 and 13.0 list different ones).

use crate::decl::{AliasDecl, StructDecl, UnionDecl};
pub use std::os::raw::{c_char, c_int, c_longlong, c_uchar, c_uint, c_ulonglong, c_void};

/// Declares type aliases and records them in [`ALIASES`].
macro_rules! aliases {
    ($( $(#[$m:meta])* pub type $name:ident = $target:ty; )*) => {
        $( $(#[$m])* #[doc = concat!("`", stringify!($name), "` of `cuda.h`.")] pub type $name = $target; )*
        /// Every alias declared in this module, for the audit.
        pub const ALIASES: &[AliasDecl] = &[
            $( AliasDecl { name: stringify!($name), target: stringify!($target) } ),*
        ];
    };
}

/// Declares opaque driver structs that are only ever used behind pointers.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("Opaque driver object `", stringify!($name), "`.")]
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
            }
        )*
    };
}

/// Declares `#[repr(C)]` structs and records their layout in [`STRUCTS`].
macro_rules! structs {
    ($( $(#[$m:meta])* pub struct $name:ident { $( pub $f:ident : $ft:ty ),* $(,)? } )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Debug, Clone, Copy)]
            pub struct $name { $( #[doc = concat!("`", stringify!($f), "`, as in `cuda.h`.")] pub $f: $ft ),* }
        )*
        /// Every struct declared in this module, with its Rust layout.
        pub const STRUCTS: &[StructDecl] = &[
            $( StructDecl {
                name: stringify!($name),
                size: std::mem::size_of::<$name>(),
                align: std::mem::align_of::<$name>(),
                fields: &[ $( (stringify!($f), std::mem::offset_of!($name, $f), stringify!($ft)) ),* ],
            } ),*
        ];
    };
}

/// Declares `#[repr(C)]` unions and records their layout in [`UNIONS`].
/// Members are `Copy`; a union has no derived `Debug` (which member is
/// live is known only to the code using it), so it prints as its name.
macro_rules! unions {
    ($( $(#[$m:meta])* pub union $name:ident { $( pub $f:ident : $ft:ty ),* $(,)? } )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy)]
            pub union $name { $( #[doc = concat!("`", stringify!($f), "`, as in `cuda.h`.")] pub $f: $ft ),* }

            impl std::fmt::Debug for $name {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.debug_struct(stringify!($name)).finish_non_exhaustive()
                }
            }
        )*
        /// Every union declared in this module, with its Rust layout.
        pub const UNIONS: &[UnionDecl] = &[
            $( UnionDecl {
                name: stringify!($name),
                size: std::mem::size_of::<$name>(),
                align: std::mem::align_of::<$name>(),
                fields: &[ $( (stringify!($f), stringify!($ft)) ),* ],
            } ),*
        ];
    };
}

opaque!(CUctx_st, CUmod_st, CUfunc_st, CUstream_st, CUevent_st, CUgraph_st, CUgraphExec_st, CUgraphNode_st,);
// Graph building.
opaque!(CUkern_st);

// --- green contexts (CUDA 12.4+)
opaque!(CUgreenCtx_st, CUdevResourceDesc_st,);
// The JIT linker.
opaque!(CUlinkState_st);

aliases! {
    /// `cuuint64_t` (`uint64_t`).
    pub type cuuint64_t = u64;
    /// Status of every driver call (`enum cudaError_enum`).
    pub type CUresult = c_uint;
    pub type CUdevice_v1 = c_int;
    /// A device ordinal as the driver sees it.
    pub type CUdevice = CUdevice_v1;
    pub type CUdeviceptr_v2 = c_ulonglong;
    /// A device address (64-bit since CUDA 3.2).
    pub type CUdeviceptr = CUdeviceptr_v2;
    pub type CUcontext = *mut CUctx_st;
    pub type CUmodule = *mut CUmod_st;
    pub type CUfunction = *mut CUfunc_st;
    pub type CUstream = *mut CUstream_st;
    pub type CUevent = *mut CUevent_st;
    pub type CUgraph = *mut CUgraph_st;
    pub type CUgraphExec = *mut CUgraphExec_st;
    pub type CUgraphNode = *mut CUgraphNode_st;
    /// `enum CUstreamCaptureMode_enum`.
    pub type CUstreamCaptureMode = c_uint;
    /// `enum CUstreamCaptureStatus_enum`.
    pub type CUstreamCaptureStatus = c_uint;
    /// `enum CUstream_flags_enum`.
    pub type CUstream_flags = c_uint;
    /// `enum CUevent_flags_enum`.
    pub type CUevent_flags = c_uint;
    /// `enum CUctx_flags_enum`.
    pub type CUctx_flags = c_uint;
    /// `enum CUdevice_attribute_enum`.
    pub type CUdevice_attribute = c_uint;
    /// `enum CUpointer_attribute_enum`.
    pub type CUpointer_attribute = c_uint;
    /// `enum CUfunction_attribute_enum`.
    pub type CUfunction_attribute = c_uint;
    /// `enum CUjit_option_enum`.
    pub type CUjit_option = c_uint;
    /// `enum CUdriverProcAddress_flags_enum`.
    pub type CUdriverProcAddress_flags = c_uint;
    /// `enum CUdriverProcAddressQueryResult_enum` (CUDA 12.0+).
    pub type CUdriverProcAddressQueryResult = c_uint;
    /// `enum CUgraphExecUpdateResult_enum`.
    pub type CUgraphExecUpdateResult = c_uint;
    /// `struct CUuuid_st`.
    pub type CUuuid = CUuuid_st;
    /// `struct CUgraphExecUpdateResultInfo_st` (CUDA 12.0+).
    pub type CUgraphExecUpdateResultInfo = CUgraphExecUpdateResultInfo_st;
    /// `enum CUaccessProperty_enum`.
    pub type CUaccessProperty = c_uint;
    pub type CUaccessPolicyWindow_v1 = CUaccessPolicyWindow_st;
    /// `struct CUaccessPolicyWindow_st` (a member of the launch-attribute union).
    pub type CUaccessPolicyWindow = CUaccessPolicyWindow_v1;
    /// `enum CUlaunchAttributeID_enum` (CUDA 11.8+).
    pub type CUlaunchAttributeID = c_uint;
    /// `union CUlaunchAttributeValue_union`.
    pub type CUlaunchAttributeValue = CUlaunchAttributeValue_union;
    /// `struct CUlaunchAttribute_st`.
    pub type CUlaunchAttribute = CUlaunchAttribute_st;
    /// `struct CUlaunchConfig_st`, the argument of `cuLaunchKernelEx`.
    pub type CUlaunchConfig = CUlaunchConfig_st;
    /// `enum CUgraphDependencyType_enum` (CUDA 12.3+).
    pub type CUgraphDependencyType = c_uint;
    /// `struct CUgraphEdgeData_st` (CUDA 12.3+).
    pub type CUgraphEdgeData = CUgraphEdgeData_st;
    /// `enum CUgraphDebugDot_flags_enum`.
    pub type CUgraphDebugDot_flags = c_uint;

    // --- green contexts (CUDA 12.4+) -------------------------------------
    /// A green context: a set of the device's SMs with its own work
    /// submission, inside the primary context (`cuGreenCtxCreate`).
    pub type CUgreenCtx = *mut CUgreenCtx_st;
    /// A resource descriptor (`cuDevResourceGenerateDesc`).
    pub type CUdevResourceDesc = *mut CUdevResourceDesc_st;
    /// The (anonymous) `CUgreenCtxCreate_flags` enum.
    pub type CUgreenCtxCreate_flags = c_uint;
    /// The (anonymous) `CUdevResourceType` enum.
    pub type CUdevResourceType = c_uint;
    /// `CUdevResource_v1`: `CUdevResource` at `RESOURCE_ABI_VERSION` 1.
    pub type CUdevResource_v1 = CUdevResource_st;
    /// `struct CUdevResource_st`, filled by `cuDeviceGetDevResource`.
    pub type CUdevResource = CUdevResource_v1;
    // --- graph building
    /// A library kernel (CUDA 12.0+); only a field of the v2 node parameters here.
    pub type CUkernel = *mut CUkern_st;
    /// `struct CUDA_KERNEL_NODE_PARAMS_st`: kernel node parameters of the
    /// 10000/10010 ABIs (driver 470 and other pre-12.0 drivers).
    pub type CUDA_KERNEL_NODE_PARAMS_v1 = CUDA_KERNEL_NODE_PARAMS_st;
    /// `struct CUDA_KERNEL_NODE_PARAMS_v2_st`: kernel node parameters of the 12000 ABIs.
    pub type CUDA_KERNEL_NODE_PARAMS_v2 = CUDA_KERNEL_NODE_PARAMS_v2_st;
    /// `struct CUDA_MEMSET_NODE_PARAMS_st`: memset node parameters.
    pub type CUDA_MEMSET_NODE_PARAMS_v1 = CUDA_MEMSET_NODE_PARAMS_st;
    /// `enum CUgraphNodeType_enum`: a graph node's kind (`cuGraphNodeGetType`).
    pub type CUgraphNodeType = c_uint;
    /// `struct CUDA_KERNEL_NODE_PARAMS_v3_st`: the kernel member of
    /// [`CUgraphNodeParams`] (the v2 layout under another name).
    pub type CUDA_KERNEL_NODE_PARAMS_v3 = CUDA_KERNEL_NODE_PARAMS_v3_st;
    /// `struct CUgraphNodeParams_st`: any node's parameters, the argument
    /// of `cuGraphAddNode` (CUDA 12.2+).
    pub type CUgraphNodeParams = CUgraphNodeParams_st;
    // --- conditional nodes (CUDA 12.3+)
    /// A conditional node's condition (`cuGraphConditionalHandleCreate`),
    /// set from device code or to its default at each launch.
    pub type CUgraphConditionalHandle = cuuint64_t;
    /// `enum CUgraphConditionalNodeType_enum`: if, while or switch.
    pub type CUgraphConditionalNodeType = c_uint;
    // --- the JIT linker
    /// A link in progress (`cuLinkCreate` to `cuLinkDestroy`).
    pub type CUlinkState = *mut CUlinkState_st;
    /// `enum CUjitInputType_enum`: what an input of the linker is.
    pub type CUjitInputType = c_uint;
}

structs! {
    /// A device UUID (`cuDeviceGetUuid`).
    pub struct CUuuid_st {
        pub bytes: [c_char; 16],
    }
    /// What `cuGraphExecUpdate` (ABI 12000) reports.
    pub struct CUgraphExecUpdateResultInfo_st {
        pub result: CUgraphExecUpdateResult,
        pub errorNode: CUgraphNode,
        pub errorFromNode: CUgraphNode,
    }
    /// An L2 access-policy window; here only as a member of
    /// [`CUlaunchAttributeValue_union`], whose alignment it sets.
    pub struct CUaccessPolicyWindow_st {
        pub base_ptr: *mut c_void,
        pub num_bytes: usize,
        pub hitRatio: f32,
        pub hitProp: CUaccessProperty,
        pub missProp: CUaccessProperty,
    }
    /// One launch attribute of `cuLaunchKernelEx`: an id, padding to 8
    /// bytes (`char pad[8 - sizeof(CUlaunchAttributeID)]`) and the value.
    pub struct CUlaunchAttribute_st {
        pub id: CUlaunchAttributeID,
        pub pad: [c_char; 4],
        pub value: CUlaunchAttributeValue,
    }
    /// The extensible launch configuration of `cuLaunchKernelEx` (ABI 11060).
    pub struct CUlaunchConfig_st {
        pub gridDimX: c_uint,
        pub gridDimY: c_uint,
        pub gridDimZ: c_uint,
        pub blockDimX: c_uint,
        pub blockDimY: c_uint,
        pub blockDimZ: c_uint,
        pub sharedMemBytes: c_uint,
        pub hStream: CUstream,
        pub attrs: *mut CUlaunchAttribute,
        pub numAttrs: c_uint,
    }
    /// The annotation of one graph edge (`cuGraphGetEdges`, ABI 12030):
    /// `type` is a [`CUgraphDependencyType`], `from_port` one of the
    /// `CU_GRAPH_KERNEL_NODE_PORT_*` values.
    pub struct CUgraphEdgeData_st {
        pub from_port: c_uchar,
        pub to_port: c_uchar,
        pub type_: c_uchar,
        pub reserved: [c_uchar; 5],
    }

    // --- green contexts (CUDA 12.4+) -------------------------------------
    /// A device resource (`RESOURCE_ABI_VERSION` 1): its type, 92 bytes the
    /// driver keeps to itself, and the type's data in a 48-byte union at
    /// offset 96. The same size (144) and offsets in CUDA 12.9 and 13.0.
    /// Only the driver writes it; fc-graph passes it from
    /// `cuDeviceGetDevResource` to `cuDevResourceGenerateDesc` and reads
    /// `type_` alone. The field names are bindgen's for the header's
    /// anonymous union, so that the audit can compare them.
    pub struct CUdevResource_st {
        pub type_: CUdevResourceType,
        pub _internal_padding: [c_uchar; 92],
        pub __bindgen_anon_1: CUdevResource_st__bindgen_ty_1,
    }
    // --- graph building
    /// A kernel node's launch (`cuGraphAddKernelNode` 10000,
    /// `cuGraphExecKernelNodeSetParams` 10010): the v1 layout, without
    /// `kern` and `ctx`.
    pub struct CUDA_KERNEL_NODE_PARAMS_st {
        pub func: CUfunction,
        pub gridDimX: c_uint,
        pub gridDimY: c_uint,
        pub gridDimZ: c_uint,
        pub blockDimX: c_uint,
        pub blockDimY: c_uint,
        pub blockDimZ: c_uint,
        pub sharedMemBytes: c_uint,
        pub kernelParams: *mut *mut c_void,
        pub extra: *mut *mut c_void,
    }
    /// A kernel node's launch, the 12000 ABIs' v2 layout: v1 plus `kern`
    /// (used only when `func` is null) and `ctx` (ignored when `func` is set).
    pub struct CUDA_KERNEL_NODE_PARAMS_v2_st {
        pub func: CUfunction,
        pub gridDimX: c_uint,
        pub gridDimY: c_uint,
        pub gridDimZ: c_uint,
        pub blockDimX: c_uint,
        pub blockDimY: c_uint,
        pub blockDimZ: c_uint,
        pub sharedMemBytes: c_uint,
        pub kernelParams: *mut *mut c_void,
        pub extra: *mut *mut c_void,
        pub kern: CUkernel,
        pub ctx: CUcontext,
    }
    /// A memset node: `height` rows of `width` elements of `elementSize`
    /// bytes (1, 2 or 4) set to `value`, rows `pitch` bytes apart.
    pub struct CUDA_MEMSET_NODE_PARAMS_st {
        pub dst: CUdeviceptr,
        pub pitch: usize,
        pub value: c_uint,
        pub elementSize: c_uint,
        pub width: usize,
        pub height: usize,
    }
    /// A kernel node's launch as a member of [`CUgraphNodeParams`]: the
    /// fields and layout of [`CUDA_KERNEL_NODE_PARAMS_v2_st`].
    pub struct CUDA_KERNEL_NODE_PARAMS_v3_st {
        pub func: CUfunction,
        pub gridDimX: c_uint,
        pub gridDimY: c_uint,
        pub gridDimZ: c_uint,
        pub blockDimX: c_uint,
        pub blockDimY: c_uint,
        pub blockDimZ: c_uint,
        pub sharedMemBytes: c_uint,
        pub kernelParams: *mut *mut c_void,
        pub extra: *mut *mut c_void,
        pub kern: CUkernel,
        pub ctx: CUcontext,
    }
    /// A conditional node (CUDA 12.3+): its condition `handle`, `type_` (a
    /// [`CUgraphConditionalNodeType`]), `size` body graphs, and
    /// `phGraph_out`, which the driver points at the bodies' graphs (owned
    /// by the node) when it adds the node. `ctx` is the context of the
    /// handle and of every body node. The header's struct tag is the
    /// typedef's name.
    pub struct CUDA_CONDITIONAL_NODE_PARAMS {
        pub handle: CUgraphConditionalHandle,
        pub type_: CUgraphConditionalNodeType,
        pub size: c_uint,
        pub phGraph_out: *mut CUgraph,
        pub ctx: CUcontext,
    }
    /// Any node's parameters (`cuGraphAddNode`): its `type_` (a
    /// [`CUgraphNodeType`]), 12 reserved bytes, the parameters of that
    /// type in a 232-byte union at offset 16, and 8 more reserved bytes:
    /// 256 bytes, as in CUDA 12.9 and 13.0. Reserved and unused bytes must
    /// be zero; make one with [`CUgraphNodeParams_st::conditional`] or
    /// [`CUgraphNodeParams_st::kernel`], which zero them. The union's
    /// field and type names are bindgen's for the header's anonymous union,
    /// so that the audit can compare them.
    pub struct CUgraphNodeParams_st {
        pub type_: CUgraphNodeType,
        pub reserved0: [c_int; 3],
        pub __bindgen_anon_1: CUgraphNodeParams_st__bindgen_ty_1,
        pub reserved2: c_longlong,
    }
}

unions! {
    /// The value of a launch attribute. The header has more members (and
    /// CUDA 13.0 more than 12.9); these are the ones fc-graph sets, plus
    /// `pad`, which gives the header's 64 bytes, and `accessPolicyWindow`,
    /// whose pointer gives its 8-byte alignment. Zero it through `pad`,
    /// then set the member the attribute id names.
    pub union CUlaunchAttributeValue_union {
        pub pad: [c_char; 64],
        pub accessPolicyWindow: CUaccessPolicyWindow,
        pub cooperative: c_int,
        pub programmaticStreamSerializationAllowed: c_int,
        pub priority: c_int,
    }

    // --- green contexts (CUDA 12.4+) -------------------------------------
    /// The anonymous union of [`CUdevResource_st`] (bindgen's name for it).
    /// The header's members are `CUdevSmResource sm`, whose layout differs
    /// between CUDA 12.9 (4 bytes: `smCount`) and 13.0 (12 bytes: three
    /// counts), and `_oversize`, which gives both the same 48 bytes. Only
    /// `_oversize` is declared; `repr(align(4))` gives the alignment the
    /// `sm` member's `unsigned int`s give the header's.
    #[repr(align(4))]
    pub union CUdevResource_st__bindgen_ty_1 {
        pub _oversize: [c_uchar; 48],
    }

    // --- graph building
    /// The anonymous union of [`CUgraphNodeParams_st`] (bindgen's name for
    /// it). The header has a member per node type; these are the ones
    /// fc-graph may set, plus `reserved1`, which gives the header's 232
    /// bytes and 8-byte alignment.
    pub union CUgraphNodeParams_st__bindgen_ty_1 {
        pub reserved1: [c_longlong; 29],
        pub kernel: CUDA_KERNEL_NODE_PARAMS_v3,
        pub conditional: CUDA_CONDITIONAL_NODE_PARAMS,
    }
}

// The layouts of the header (CUDA 12.9 and 13.0), also checked by the
// audit; here so that a change fails the build even without the headers.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<CUDA_CONDITIONAL_NODE_PARAMS>() == 32 && align_of::<CUDA_CONDITIONAL_NODE_PARAMS>() == 8);
    assert!(offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, handle) == 0);
    assert!(offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, type_) == 8);
    assert!(offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, size) == 12);
    assert!(offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out) == 16);
    assert!(offset_of!(CUDA_CONDITIONAL_NODE_PARAMS, ctx) == 24);
    assert!(size_of::<CUDA_KERNEL_NODE_PARAMS_v3_st>() == 72 && align_of::<CUDA_KERNEL_NODE_PARAMS_v3_st>() == 8);
    assert!(size_of::<CUgraphNodeParams_st__bindgen_ty_1>() == 232);
    assert!(align_of::<CUgraphNodeParams_st__bindgen_ty_1>() == 8);
    assert!(size_of::<CUgraphNodeParams_st>() == 256 && align_of::<CUgraphNodeParams_st>() == 8);
    assert!(offset_of!(CUgraphNodeParams_st, type_) == 0);
    assert!(offset_of!(CUgraphNodeParams_st, reserved0) == 4);
    assert!(offset_of!(CUgraphNodeParams_st, __bindgen_anon_1) == 16);
    assert!(offset_of!(CUgraphNodeParams_st, reserved2) == 248);
};
