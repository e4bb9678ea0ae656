package org.tvmrt;

/**
 * A small JNI binding of the TVM C runtime API: modules, functions and float32 arrays on the
 * CPU. Handles are owned by the Java objects and freed by {@code close()}.
 */
public final class Tvm {
  static {
    System.loadLibrary("tvm4j_example");
  }

  private Tvm() {}

  static native long modLoad(String path);
  static native long modGetFunction(long mod, String name);
  static native void modFree(long mod);
  static native void funcFree(long func);
  static native void funcCallArrays(long func, long[] arrays);
  static native long arrayFromFloats(float[] data, long[] shape);
  static native float[] arrayToFloats(long array);
  static native void arrayFree(long array);

  /** A loaded module. */
  public static final class Module implements AutoCloseable {
    private long handle;

    private Module(long handle) {
      this.handle = handle;
    }

    /** Loads a TVM-exported library. */
    public static Module load(String path) {
      return new Module(modLoad(path));
    }

    /** A function of the module (or its imports). */
    public Function function(String name) {
      return new Function(modGetFunction(handle, name));
    }

    @Override
    public void close() {
      if (handle != 0) {
        modFree(handle);
        handle = 0;
      }
    }
  }

  /** A packed function. */
  public static final class Function implements AutoCloseable {
    private long handle;

    private Function(long handle) {
      this.handle = handle;
    }

    /** Calls the function with arrays as arguments. */
    public void call(NDArray... args) {
      long[] hs = new long[args.length];
      for (int i = 0; i < args.length; ++i) hs[i] = args[i].handle;
      funcCallArrays(handle, hs);
    }

    @Override
    public void close() {
      if (handle != 0) {
        funcFree(handle);
        handle = 0;
      }
    }
  }

  /** A float32 array on the CPU. */
  public static final class NDArray implements AutoCloseable {
    private long handle;

    private NDArray(long handle) {
      this.handle = handle;
    }

    /** An array holding a copy of {@code data} with the given shape. */
    public static NDArray fromFloats(float[] data, long... shape) {
      return new NDArray(arrayFromFloats(data, shape));
    }

    /** The elements. */
    public float[] toFloats() {
      return arrayToFloats(handle);
    }

    @Override
    public void close() {
      if (handle != 0) {
        arrayFree(handle);
        handle = 0;
      }
    }
  }
}
