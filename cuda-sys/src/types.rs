//! Scalar typedefs, opaque handles and structs of the CUDA driver API.
//!
//! Checked against `cuda.h` of CUDA 12.9 and 13.0 by `tests/audit.rs`:
//! every alias below resolves to the same primitive or pointer as the
//! header's, and every struct has the header's size, alignment and offsets.

use crate::audit::{AliasDecl, StructDecl};
pub use std::os::raw::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_void};

/// Declares type aliases and records them in [`ALIASES`].
macro_rules! aliases {
    ($( $(#[$m:meta])* pub type $name:ident = $target:ty; )*) => {
        $( $(#[$m])* pub type $name = $target; )*
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
            pub struct $name { $( pub $f: $ft ),* }
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

opaque!(CUctx_st, CUmod_st, CUfunc_st, CUstream_st, CUevent_st, CUgraph_st, CUgraphExec_st, CUgraphNode_st,);

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
}
