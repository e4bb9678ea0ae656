package org.tvmrt;

/** Loads a library exporting myadd(A, B, C) and checks C = A + B. */
public final class Main {
  public static void main(String[] args) {
    if (args.length < 1) {
      System.err.println("usage: Main LIBRARY.so");
      System.exit(2);
    }
    int n = 1024;
    float[] a = new float[n];
    float[] b = new float[n];
    for (int i = 0; i < n; ++i) {
      a[i] = i;
      b[i] = 0.5f * i;
    }
    try (Tvm.Module mod = Tvm.Module.load(args[0]);
        Tvm.Function add = mod.function("myadd");
        Tvm.NDArray ta = Tvm.NDArray.fromFloats(a, n);
        Tvm.NDArray tb = Tvm.NDArray.fromFloats(b, n);
        Tvm.NDArray tc = Tvm.NDArray.fromFloats(new float[n], n)) {
      add.call(ta, tb, tc);
      float[] c = tc.toFloats();
      for (int i = 0; i < n; ++i) {
        if (c[i] != a[i] + b[i]) {
          System.err.println("mismatch at " + i + ": " + c[i]);
          System.exit(1);
        }
      }
      System.out.println("java: myadd over " + n + " elements correct, c[10] = " + c[10]);
    }
    try (Tvm.Module bad = Tvm.Module.load("/nonexistent.so")) {
      System.err.println("loading a missing file should fail");
      System.exit(1);
    } catch (RuntimeException e) {
      System.out.println("java: missing file raises: " + e.getMessage().split("\n")[0]);
    }
  }
}
