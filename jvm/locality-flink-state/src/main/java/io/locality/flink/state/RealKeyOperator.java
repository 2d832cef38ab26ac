package io.locality.flink.state;

import io.locality.flink.KeyType;
import java.io.Serializable;
import java.util.Map;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;

/**
 * A keyed operator of a job that keeps each real key's state in a {@code MapState<realKey, S>} under its
 * routing key ({@code RealKeyedProcessFunction}): which table routes it, how the job names it and its
 * state, and their types.
 *
 * <p>From the command line: {@code OPERATOR=UID[,state=NAME][,key=string|long|int][,value=TYPE]}, e.g.
 * {@code hashtag=count-per-hashtag}. The state's name defaults to the uid (as in the two-stage job, whose
 * {@code CountingStage} names its {@code MapState} after its uid), the key type to the table's, the
 * value type to {@code long}; a value type is {@code long}, {@code int}, {@code double}, {@code boolean},
 * {@code string} or the class name of a Flink POJO or other type Flink serializes the same way in the job.
 *
 * @param operator the table's operator in the store's topology
 * @param uid the operator's uid in the job graph (its identity in the savepoint)
 * @param stateName the name of its {@code MapState}
 * @param keyType the type of the real keys, or null for the table's
 * @param valueType the type of one real key's state
 */
public record RealKeyOperator(String operator, String uid, String stateName, KeyType keyType,
        TypeInformation<?> valueType) implements Serializable {

    private static final Map<String, TypeInformation<?>> NAMED_VALUES = Map.of("long", Types.LONG, "int", Types.INT,
            "double", Types.DOUBLE, "boolean", Types.BOOLEAN, "string", Types.STRING);

    /**
     * Parses {@code OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]}.
     *
     * @throws IllegalArgumentException naming the part that is wrong
     */
    public static RealKeyOperator parse(String text) {
        String[] parts = text.split(",");
        String[] head = parts[0].split("=", 2);
        if (head.length != 2 || head[0].isBlank() || head[1].isBlank()) {
            throw new IllegalArgumentException("--operator must be OPERATOR=UID[,state=NAME][,key=TYPE][,value=TYPE]; "
                    + "got '" + text + "'");
        }
        String state = head[1];
        KeyType key = null;
        TypeInformation<?> value = Types.LONG;
        for (int i = 1; i < parts.length; i++) {
            String[] option = parts[i].split("=", 2);
            String name = option[0];
            String given = option.length == 2 ? option[1] : "";
            if (given.isBlank()) {
                throw new IllegalArgumentException("--operator " + text + ": '" + parts[i] + "' needs a value");
            }
            switch (name) {
                case "state" -> state = given;
                case "key" -> key = keyType(given, text);
                case "value" -> value = valueType(given, text);
                default -> throw new IllegalArgumentException("--operator " + text + ": unknown part '" + name
                        + "' (state, key or value)");
            }
        }
        return new RealKeyOperator(head[0], head[1], state, key, value);
    }

    private static KeyType keyType(String label, String text) {
        for (KeyType type : KeyType.values()) {
            if (type.label().equals(label)) {
                return type;
            }
        }
        throw new IllegalArgumentException("--operator " + text + ": key must be string, long or int; got '" + label
                + "'");
    }

    private static TypeInformation<?> valueType(String name, String text) {
        TypeInformation<?> named = NAMED_VALUES.get(name);
        if (named != null) {
            return named;
        }
        try {
            return TypeInformation.of(Class.forName(name, false, Thread.currentThread().getContextClassLoader()));
        } catch (ClassNotFoundException e) {
            throw new IllegalArgumentException("--operator " + text + ": value type '" + name + "' is neither one of "
                    + NAMED_VALUES.keySet() + " nor a class on the classpath");
        }
    }
}
