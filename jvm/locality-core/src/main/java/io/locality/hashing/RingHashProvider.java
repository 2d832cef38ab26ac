package io.locality.hashing;

/** The fallback of tables learned with {@code --hash ring}. */
public final class RingHashProvider implements FallbackHashProvider {

    @Override
    public String engine() {
        return "ring";
    }

    @Override
    public FallbackHash create(FallbackSpec spec) {
        return new ConsistentHashRing(spec.numInstances(), spec.intParameter("virtual_nodes", 128));
    }
}
