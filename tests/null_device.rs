//! The null device backend (device type 31, host memory behind the device contract): it
//! implements the whole `DeviceApi`, so arrays, copies, views, workspaces and streams work on
//! it through the same paths as a real device.

use tvm_runtime::device::{self, null::*, DeviceApi, DeviceAttr, Stream};
use tvm_runtime::ndarray::NDArray;
use tvm_runtime::packed_func::types::{DLDataType, DLDevice, DL_FLOAT};
use tvm_runtime::packed_func::value::RetValue;
const F32: DLDataType = DLDataType::new(DL_FLOAT, 32, 1);

#[test]
fn named_and_described() {
    install();
    assert_eq!(device::type_name(DL_NULL).as_deref(), Some("null"));
    assert_eq!(device::type_from_name("null"), Some(DL_NULL));
    assert_eq!(device::describe(NULL_DEVICE), "null(0)");
    let api = device::api(NULL_DEVICE).unwrap();
    let exist = |id| {
        api.get_attr(DLDevice::new(DL_NULL, id), DeviceAttr::Exist)
            .unwrap()
    };
    assert!(matches!(exist(0), RetValue::Int(1)));
    assert!(matches!(exist(1), RetValue::Int(0)));
    assert!(api.set_device(DLDevice::new(DL_NULL, 1)).is_err());
}

#[test]
fn arrays_copies_and_views() {
    install();
    let data: Vec<f32> = (0..24).map(|i| i as f32 - 7.5).collect();
    let mut a = NDArray::empty(&[4, 6], F32, NULL_DEVICE).unwrap();
    assert_eq!(a.device(), NULL_DEVICE);
    a.copy_from_slice(&data).unwrap();
    assert_eq!(a.to_vec::<f32>().unwrap(), data);
    // Device to device, device to host, host to device.
    let mut b = NDArray::empty(&[4, 6], F32, NULL_DEVICE).unwrap();
    a.copy_to(&mut b).unwrap();
    let mut host = NDArray::empty(&[4, 6], F32, DLDevice::CPU).unwrap();
    b.copy_to(&mut host).unwrap();
    assert_eq!(host.to_vec::<f32>().unwrap(), data);
    let mut c = NDArray::empty(&[4, 6], F32, NULL_DEVICE).unwrap();
    host.copy_to(&mut c).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), data);
    // A view at a byte offset.
    let v = c.view(&[2, 3], F32, 6 * 4).unwrap();
    assert_eq!(v.to_vec::<f32>().unwrap(), data[6..12].to_vec());
    assert!(
        c.view(&[30], F32, 0).is_err(),
        "a view larger than its base"
    );
}

#[test]
fn blocks_are_freed_once() {
    let api = NullDeviceApi::default();
    let p = api.alloc_data_space(NULL_DEVICE, 100, 64, F32).unwrap();
    assert_eq!(p as usize % 64, 0);
    let w = api.alloc_workspace(NULL_DEVICE, 10, F32).unwrap();
    assert_eq!(api.live_blocks(), 2);
    // SAFETY: `w` and `p` came from this backend; the second frees are refused by the
    // bookkeeping (what this checks) without touching memory.
    unsafe {
        assert!(
            api.free_data_space(NULL_DEVICE, w).is_err(),
            "workspace is not data"
        );
        api.free_workspace(NULL_DEVICE, w).unwrap();
        assert!(api.free_workspace(NULL_DEVICE, w).is_err());
        api.free_data_space(NULL_DEVICE, p).unwrap();
        assert!(api.free_data_space(NULL_DEVICE, p).is_err());
    }
    assert_eq!(api.live_blocks(), 0);
    assert!(api
        .alloc_data_space(DLDevice::new(DL_NULL, 2), 8, 64, F32)
        .is_err());
}

#[test]
fn streams() {
    let api = NullDeviceApi::default();
    let s1 = api.create_stream(NULL_DEVICE).unwrap();
    let s2 = api.create_stream(NULL_DEVICE).unwrap();
    assert!(!s1.is_null() && s1 != s2);
    // SAFETY: live streams of this backend, freed once after they stop being current;
    // the bogus and stale handles are refused by the bookkeeping.
    unsafe {
        api.set_stream(NULL_DEVICE, s1).unwrap();
        assert_eq!(api.current_stream(NULL_DEVICE), s1);
        api.sync_stream_from_to(NULL_DEVICE, s1, s2).unwrap();
        api.stream_sync(NULL_DEVICE, s2).unwrap();
        assert!(api.free_stream(NULL_DEVICE, s1).is_err(), "current stream");
        api.set_stream(NULL_DEVICE, std::ptr::null_mut()).unwrap();
        api.free_stream(NULL_DEVICE, s1).unwrap();
        api.free_stream(NULL_DEVICE, s2).unwrap();
        assert!(api.stream_sync(NULL_DEVICE, s1).is_err(), "freed stream");
        assert!(api.free_stream(NULL_DEVICE, s2).is_err(), "double free");
        assert!(api.set_stream(NULL_DEVICE, 0x99 as Stream).is_err());
    }
    api.sync(NULL_DEVICE).unwrap();
}
