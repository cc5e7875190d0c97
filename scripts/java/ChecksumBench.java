// CRC32 and CRC32C throughput of Java 17's java.util.zip.CRC32 / CRC32C, the classes Ozone's
// Checksum.java uses, for comparison with common/examples/checksum_bench.rs
// (scripts/bench-checksum.sh runs both and prints a table).
//
// Same work as the Rust side: one checksum per 16 KiB window over a buffer (4 MiB by default;
// bench-checksum.sh also runs 256 KiB), repeated for about 1.5 s per algorithm after a 2 s JIT warm-up. The buffer holds the same pseudo-random bytes as on
// the Rust side, so the printed checksum of the last window must agree. GB/s = 10^9 bytes/s, given
// per wall-clock second and per second of the measuring thread's CPU time (steadier on a busy machine).
//
// Alignment: the intrinsics of CRC32/CRC32C (AVX-512 on a CPU that has it) run ~20 % faster on a
// 64-byte-aligned buffer, and a heap byte[] lands wherever the allocator puts it, which differs from
// run to run. With --align A the data live in a direct ByteBuffer A bytes past a 64-byte boundary
// (as checksum_bench.rs's --align places its buffer) and each window goes through
// Checksum.update(ByteBuffer), the call Ozone's ChecksumByteBufferImpl makes; the same intrinsic
// runs as for a byte[]. Without --align: a heap byte[] and update(byte[], off, len), alignment unknown.
//
// Run without a compile step (Java 11+ source launcher):
//   java scripts/java/ChecksumBench.java [--seconds 1.5] [--warmup 2] [--buffer-mib 4 | --buffer-kib 4096] [--window-kib 16] [--align 16]

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.ByteBuffer;
import java.util.function.Supplier;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;
import java.util.zip.Checksum;

public class ChecksumBench {
    static double seconds = 1.5;
    static double warmupSeconds = 2.0;
    static int bufferBytes = 4 << 20;
    static int windowBytes = 16 << 10;
    /** Bytes past a 64-byte boundary, or -1: a heap byte[] of unknown alignment. */
    static int align = -1;

    /** Defeats dead-code elimination. */
    static volatile int sink;

    public static void main(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (i + 1 >= args.length) {
                usage(flag + " needs a value");
            }
            String value = args[++i];
            switch (flag) {
                case "--seconds": seconds = Double.parseDouble(value); break;
                case "--warmup": warmupSeconds = Double.parseDouble(value); break;
                case "--buffer-mib": bufferBytes = Integer.parseInt(value) << 20; break;
                case "--buffer-kib": bufferBytes = Integer.parseInt(value) << 10; break;
                case "--window-kib": windowBytes = Integer.parseInt(value) << 10; break;
                case "--align": align = Integer.parseInt(value); break;
                default: usage("unknown argument " + flag);
            }
        }
        if (!(seconds > 0) || warmupSeconds < 0 || bufferBytes <= 0 || windowBytes <= 0) {
            usage("--seconds, the buffer size and --window-kib must be positive");
        }
        if (align < -1 || align >= 64) {
            usage("--align must be 0..63");
        }
        byte[] buf = new byte[bufferBytes];
        fill(buf);
        ByteBuffer direct = null;
        if (align >= 0) {
            direct = ByteBuffer.allocateDirect(bufferBytes + 128).alignedSlice(64);
            direct.position(align).limit(align + bufferBytes);
            direct = direct.slice();
            direct.put(buf).clear();
        }
        int windows = (bufferBytes + windowBytes - 1) / windowBytes;
        System.out.printf("Java %s checksum throughput: %d windows of %d bytes over a %d-byte %s, "
                + "~%s s per figure after %s s warm-up; GB/s = 10^9 bytes/s%n",
                System.getProperty("java.version"), windows, windowBytes, bufferBytes,
                align >= 0 ? "direct ByteBuffer " + align + " bytes past a 64-byte boundary" : "heap byte[]",
                seconds, warmupSeconds);
        run("CRC32", CRC32::new, buf, direct, windows);
        run("CRC32C", CRC32C::new, buf, direct, windows);
    }

    static void usage(String message) {
        System.err.println(message);
        System.err.println("usage: java ChecksumBench.java [--seconds S] [--warmup S] [--buffer-mib N | --buffer-kib N] [--window-kib K] [--align A]");
        System.exit(2);
    }

    /** Same generator as checksum_bench.rs: 64-bit LCG, one byte per step from the top 8 bits. */
    static void fill(byte[] buf) {
        long x = 0x0123456789abcdefL;
        for (int i = 0; i < buf.length; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            buf[i] = (byte) (x >>> 56);
        }
    }

    /** One pass: one checksum per window, as Ozone's Checksum.computeChecksum does; returns the last. */
    static int pass(Checksum crc, byte[] buf, int[] out) {
        int w = 0;
        for (int off = 0; off < buf.length; off += windowBytes) {
            int len = Math.min(windowBytes, buf.length - off);
            crc.reset();
            crc.update(buf, off, len);
            out[w++] = (int) crc.getValue();
        }
        return out[w - 1];
    }

    /** The same over a direct buffer, window by window through update(ByteBuffer). */
    static int pass(Checksum crc, ByteBuffer buf, int[] out) {
        int w = 0;
        int len = buf.capacity();
        for (int off = 0; off < len; off += windowBytes) {
            crc.reset();
            buf.limit(Math.min(off + windowBytes, len)).position(off);
            crc.update(buf);
            out[w++] = (int) crc.getValue();
        }
        return out[w - 1];
    }

    static int pass(Checksum crc, byte[] buf, ByteBuffer direct, int[] out) {
        return direct != null ? pass(crc, direct, out) : pass(crc, buf, out);
    }

    static void run(String name, Supplier<Checksum> factory, byte[] buf, ByteBuffer direct, int windows) {
        Checksum crc = factory.get();
        int[] out = new int[windows];
        long warmEnd = System.nanoTime() + (long) (warmupSeconds * 1e9);
        while (System.nanoTime() < warmEnd) {
            sink = pass(crc, buf, direct, out);
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        boolean cpuTime = threads.isCurrentThreadCpuTimeSupported();
        long budget = (long) (seconds * 1e9);
        long cpuStart = cpuTime ? threads.getCurrentThreadCpuTime() : 0;
        long start = System.nanoTime();
        long passes = 1;
        int last = pass(crc, buf, direct, out);
        while (System.nanoTime() - start < budget) {
            last = pass(crc, buf, direct, out);
            passes++;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        double cpuSecs = cpuTime ? (threads.getCurrentThreadCpuTime() - cpuStart) / 1e9 : 0;
        sink = last;
        long bytes = passes * (long) buf.length;
        double gbps = bytes / secs / 1e9;
        String cpuGbps = cpuSecs > 0 ? String.format("%.3f", bytes / cpuSecs / 1e9) : "n/a";
        System.out.printf("%-7s %-10s %7.2f GB/s wall, %7s GB/s per CPU-second   last window checksum 0x%08x%n",
                name, "java.util", gbps, cpuSecs > 0 ? String.format("%.2f", bytes / cpuSecs / 1e9) : "n/a", last);
        System.out.printf("RESULT impl=java algo=%s buffer=%d align=%s gbps=%.3f cpu_gbps=%s last=0x%08x bytes=%d secs=%.3f uses=java.util.zip.%s%n",
                name, buf.length, align >= 0 ? Integer.toString(align) : "unknown", gbps, cpuGbps, last, bytes, secs, name);
    }
}
