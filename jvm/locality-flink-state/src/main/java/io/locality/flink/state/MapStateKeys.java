package io.locality.flink.state;

import java.io.IOException;
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
 * key and the real key of an entry, and gives the same entry under another routing key, the namespace and
 * real key bytes copied as they are. Serializers are the savepoint's own (restored from its header). Not
 * thread-safe: one per reader.
 */
final class MapStateKeys {
    private final int keyGroupPrefixBytes;
    private final TypeSerializer<Object> keySerializer;
    private final TypeSerializer<Object> namespaceSerializer;
    private final TypeSerializer<Object> realKeySerializer;
    private final boolean ambiguous;
    private final DataInputDeserializer in = new DataInputDeserializer();
    private final DataOutputSerializer out = new DataOutputSerializer(64);
    private Object routingKey;
    private Object realKey;
    private int routingKeyEnd;
    private int realKeyLength;

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
    }

    /** Reads an entry's key: then {@link #routingKey()}, {@link #realKey()} and {@link #realKeyLength()} are its. */
    void read(byte[] key) throws IOException {
        in.setBuffer(key);
        CompositeKeySerializationUtils.readKeyGroup(keyGroupPrefixBytes, in);
        routingKey = CompositeKeySerializationUtils.readKey(keySerializer, in, ambiguous);
        routingKeyEnd = in.getPosition();
        CompositeKeySerializationUtils.readNamespace(namespaceSerializer, in, ambiguous);
        int realKeyStart = in.getPosition();
        realKey = realKeySerializer.deserialize(in);
        realKeyLength = in.getPosition() - realKeyStart;
    }

    Object routingKey() {
        return routingKey;
    }

    Object realKey() {
        return realKey;
    }

    int realKeyLength() {
        return realKeyLength;
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
