package io.locality.flink.state;

import java.io.IOException;
import java.util.Arrays;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.runtime.state.CompositeKeySerializationUtils;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot.CommonSerializerKeys;

/**
 * The keys of a {@code MapState}'s entries in a savepoint: {@code key group :: routing key :: namespace ::
 * real key} (the routing key and namespace followed by their lengths when both serializers are of variable
 * length), as {@code CompositeKeySerializationUtils} lays them out for every state backend. Reads the routing
 * key of an entry, its real key only when asked, and gives the same entry under another routing key, the
 * namespace and real key bytes copied as they are. Serializers are the savepoint's own (restored from its
 * header). Not thread-safe: one per reader.
 */
final class MapStateKeys {
    private final int keyGroupPrefixBytes;
    private final TypeSerializer<Object> keySerializer;
    private final TypeSerializer<Object> namespaceSerializer;
    private final TypeSerializer<Object> realKeySerializer;
    private final boolean ambiguous;
    /** Whether a real key's bytes equal its routing key's exactly when the two keys are equal. */
    private final boolean comparableBytes;
    private final DataInputDeserializer in = new DataInputDeserializer();
    private final DataOutputSerializer out = new DataOutputSerializer(64);
    private byte[] key;
    private Object routingKey;
    private Object realKey;
    private int routingKeyEnd;
    private int realKeyStart;

    @SuppressWarnings("unchecked")
    MapStateKeys(KeyedBackendSerializationProxy<?> header, StateMetaInfoSnapshot mapState, int maxParallelism) {
        this.keyGroupPrefixBytes = CompositeKeySerializationUtils.computeRequiredBytesInKeyGroupPrefix(maxParallelism);
        this.keySerializer = (TypeSerializer<Object>) header.getKeySerializerSnapshot().restoreSerializer();
        this.namespaceSerializer = (TypeSerializer<Object>) mapState
                .getTypeSerializerSnapshot(CommonSerializerKeys.NAMESPACE_SERIALIZER).restoreSerializer();
        MapSerializer<Object, Object> map = (MapSerializer<Object, Object>) mapState
                .getTypeSerializerSnapshot(CommonSerializerKeys.VALUE_SERIALIZER).restoreSerializer();
        this.realKeySerializer = map.getKeySerializer();
        this.ambiguous = CompositeKeySerializationUtils.isAmbiguousKeyPossible(keySerializer, namespaceSerializer);
        // ambiguous: the routing key's bytes are followed by their length, so they end before routingKeyEnd
        this.comparableBytes = !ambiguous && keySerializer.equals(realKeySerializer);
    }

    /** The serializer of the real keys (the {@code MapState}'s keys). */
    TypeSerializer<Object> realKeySerializer() {
        return realKeySerializer;
    }

    /** Reads an entry's key: then {@link #routingKey()}, {@link #realKey()} and the real key's bytes are its. */
    void read(byte[] key) throws IOException {
        this.key = key;
        in.setBuffer(key);
        CompositeKeySerializationUtils.readKeyGroup(keyGroupPrefixBytes, in);
        routingKey = CompositeKeySerializationUtils.readKey(keySerializer, in, ambiguous);
        routingKeyEnd = in.getPosition();
        CompositeKeySerializationUtils.readNamespace(namespaceSerializer, in, ambiguous);
        realKeyStart = in.getPosition(); // the real key ends the composite key
        realKey = null;
    }

    Object routingKey() {
        return routingKey;
    }

    /** The real key, decoded at the first call after {@link #read}. */
    Object realKey() throws IOException {
        if (realKey == null) {
            in.setBuffer(key, realKeyStart, key.length - realKeyStart);
            realKey = realKeySerializer.deserialize(in);
        }
        return realKey;
    }

    /** Where the real key's bytes start in the key read (they run to its end). */
    int realKeyStart() {
        return realKeyStart;
    }

    int realKeyLength() {
        return key.length - realKeyStart;
    }

    /**
     * Whether the entry read sits under its real key itself, told from their bytes; false also when the
     * serializers do not let bytes tell (the keys must then be decoded).
     */
    boolean underItsRealKey() {
        return comparableBytes
                && Arrays.equals(key, keyGroupPrefixBytes, routingKeyEnd, key, realKeyStart, key.length);
    }

    /** The key last {@link #read} under {@code newRoutingKey}, in key group {@code keyGroup}. */
    byte[] withRoutingKey(byte[] key, Object newRoutingKey, int keyGroup) throws IOException {
        out.clear();
        CompositeKeySerializationUtils.writeKeyGroup(keyGroup, keyGroupPrefixBytes, out);
        CompositeKeySerializationUtils.writeKey(newRoutingKey, keySerializer, out, ambiguous);
        out.write(key, routingKeyEnd, key.length - routingKeyEnd);
        return out.getCopyOfBuffer();
    }
}
